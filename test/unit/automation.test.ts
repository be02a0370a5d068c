/**
 * The Automation API harness (test/automation.ts) gives each inline run's gRPC clients subchannels of
 * their own. Shown with the grpc-js the SDK loads and the SDK's own client options: a port whose
 * shared subchannel failed (a client called it while nothing listened, as a run's leftover call does
 * after its engine exited) is then served to a new client once a server listens there; with the
 * shared pool the new client fails at once, as an e2e up once did.
 */
import { createRequire } from "module";
import { afterEach, describe, expect, it } from "vitest";
import { ownSubchannelsPerRun } from "../automation";
import { closedPort } from "./ports";

type Callback = (error: { details: string } | null, reply?: Buffer) => void;
interface PingClient {
    ping(request: Buffer, callback: Callback): void;
    close(): void;
}
interface Grpc {
    makeGenericClientConstructor(methods: object, name: string): new (address: string, credentials: unknown, options: object) => PingClient;
    credentials: { createInsecure(): unknown };
    ServerCredentials: { createInsecure(): unknown };
    Server: new () => {
        addService(methods: object, handlers: object): void;
        bindAsync(address: string, credentials: unknown, callback: (error: Error | null) => void): void;
        forceShutdown(): void;
    };
}
const grpc = createRequire(require.resolve("@pulumi/pulumi/package.json"))("@grpc/grpc-js") as Grpc;

const same = (bytes: Buffer) => bytes;
const PING = { ping: { path: "/vllmfleet.Test/Ping", requestStream: false, responseStream: false, requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same } };
const Client = grpc.makeGenericClientConstructor(PING, "Test");

const closers: Array<() => void> = [];
afterEach(() => closers.splice(0).forEach((close) => close()));

/** The reply of one ping through a new client with `options`, or the error's details. */
function ping(port: number, options: object): Promise<string> {
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), options);
    closers.push(() => client.close());
    return new Promise((resolve) => client.ping(Buffer.from("ping"), (error, reply) => resolve(error ? `error: ${error.details}` : reply!.toString())));
}

/** A port a client failed to reach (its subchannel left in transient failure), where a server now answers "pong". */
async function portRefusedBefore(options: object): Promise<number> {
    const port = await closedPort();
    expect(await ping(port, options)).toMatch(/^error: .*ECONNREFUSED/);
    const server = new grpc.Server();
    server.addService(PING, { ping: (_call: unknown, callback: Callback) => callback(null, Buffer.from("pong")) });
    await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())));
    closers.push(() => server.forceShutdown());
    return port;
}

describe("the Automation API harness's gRPC clients", () => {
    it("reach a new server on a port whose earlier server was gone when a client called it", async () => {
        const options = ownSubchannelsPerRun();
        expect(options["grpc.use_local_subchannel_pool"]).toBe(1);
        expect(await ping(await portRefusedBefore(options), options)).toBe("pong");
    });

    it("would inherit the failed subchannel with grpc-js's shared pool, and fail at once", async () => {
        const { "grpc.use_local_subchannel_pool": _local, ...shared } = ownSubchannelsPerRun();
        expect(await ping(await portRefusedBefore(shared), shared)).toBe("error: No connection established. Last error: null. Resolution note: ");
    });
});
