/**
 * A random secret made once and kept by the stack (encrypted in its state, like any Pulumi secret):
 * the Ray cluster's token and the default API key. Made by the program itself (a dynamic resource,
 * as `random.RandomPassword` would, without a provider plugin to download). It changes only when its
 * `rotation` text changes, or on `pulumi up --replace <its urn>`.
 */
import * as pulumi from "@pulumi/pulumi";

interface FleetSecretProps {
    /** What the secret is for (shown in the diff, never the value). */
    readonly purpose: string;
    /** Any text: a new one makes a new secret. */
    readonly rotation: string;
    /** Random bytes, written as hex. */
    readonly bytes: number;
    readonly value?: string;
}

const fleetSecretProvider: pulumi.dynamic.ResourceProvider = {
    async create(inputs: FleetSecretProps) {
        const crypto = require("crypto") as typeof import("crypto");
        const value = crypto.randomBytes(inputs.bytes).toString("hex");
        return { id: `${inputs.purpose}-${crypto.randomBytes(4).toString("hex")}`, outs: { ...inputs, value } };
    },
    async diff(_id: string, olds: FleetSecretProps, news: FleetSecretProps) {
        const replaces = (["purpose", "rotation", "bytes"] as const).filter((key) => olds[key] !== news[key]);
        return { changes: replaces.length > 0, replaces: [...replaces] };
    },
};

export class FleetSecret extends pulumi.dynamic.Resource {
    /** The secret, as hex. */
    public readonly value!: pulumi.Output<string>;

    constructor(name: string, args: { purpose: string; rotation?: string; bytes?: number }, opts?: pulumi.CustomResourceOptions) {
        super(
            fleetSecretProvider,
            name,
            { purpose: args.purpose, rotation: args.rotation ?? "", bytes: args.bytes ?? 32, value: undefined },
            { ...opts, additionalSecretOutputs: ["value"] },
            "secret",
            "FleetSecret",
        );
    }
}
