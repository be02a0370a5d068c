/**
 * `vllm-fleet:security`: the Ray token's rotation, the optional host firewall, who may reach the
 * ports that face clients, and which web origins may use the API from a browser. The schema, the
 * checks across keys and the preview's warning. Pure.
 */
import { z } from "zod";
import { parseCidr } from "../net";
import { CrossKeyIssue } from "./ports";

/** Everyone: the default of `security.clients`. */
export const EVERYONE = "0.0.0.0/0";

/**
 * An origin as browsers send it (`Origin:`): scheme, host and an optional port, nothing after. What
 * the services' CORS (vLLM's --allowed-origins) and the gateway's proxy compare it with, as text.
 */
const ORIGIN = /^https?:\/\/[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$/;

export const SECURITY_DEFAULTS = {
    rayTokenRotation: "",
    firewall: false,
    clients: [EVERYONE],
    servicePorts: "clients" as const,
    allowedOrigins: [] as string[],
};

export const securitySchema = z
    .strictObject({
        /** Any text; a new one makes a new Ray token (the Ray containers restart with it). */
        rayTokenRotation: z.string().max(200).default(SECURITY_DEFAULTS.rayTokenRotation),
        /** Host firewall rules: the internal ports from the fabric subnet only, the client ports from `clients`. */
        firewall: z.boolean().default(SECURITY_DEFAULTS.firewall),
        /**
         * The networks (IPv4 CIDR blocks) whose hosts may open connections to the ports that face
         * clients: `gateway.port` and each service's `vllm.port`. Enforced by the firewall.
         */
        clients: z
            .array(z.string().refine((value) => parseCidr(value) !== undefined, "an IPv4 CIDR block such as 10.1.230.0/24 (no host bits set; 0.0.0.0/0 is everyone)"))
            .min(1, "at least one network (0.0.0.0/0 is everyone)")
            .max(64, "at most 64 networks")
            .default(SECURITY_DEFAULTS.clients),
        /**
         * Who may reach each service's `vllm.port` with the firewall: `clients` (as `clients` says) or
         * `gateway` (only over the fabric, where the gateway reaches the services: clients go through
         * the gateway).
         */
        servicePorts: z.enum(["clients", "gateway"]).default(SECURITY_DEFAULTS.servicePorts),
        /** The web origins that may use the API from a browser (CORS); none by default. */
        allowedOrigins: z
            .array(z.string().regex(ORIGIN, "an origin such as https://chat.example.com or http://10.1.230.5:3000 (scheme, host and port only; no wildcard)"))
            .max(32, "at most 32 origins")
            .default(SECURITY_DEFAULTS.allowedOrigins),
    })
    .default(SECURITY_DEFAULTS);

export type SecurityConfig = z.output<typeof securitySchema>;

/** Whether `clients` lets everyone in (a network of prefix 0). */
export function clientsAreEveryone(clients: readonly string[]): boolean {
    return clients.some((cidr) => parseCidr(cidr)?.prefix === 0);
}

/**
 * The checks of `security` across keys: `clients` and `servicePorts: gateway` are what the firewall
 * enforces, so they need it (set without it they would promise what nothing does); `servicePorts:
 * gateway` needs a gateway, through which clients then reach the services.
 */
export function securityIssues(security: SecurityConfig, hasGateway: boolean): CrossKeyIssue[] {
    const issues: CrossKeyIssue[] = [];
    if (!security.firewall && !clientsAreEveryone(security.clients)) {
        issues.push({
            path: ["security", "clients"],
            value: security.clients,
            expected: `${EVERYONE} (the default) unless vllm-fleet:security.firewall is true: the firewall's rules are what keep other networks out`,
        });
    }
    if (security.servicePorts === "gateway") {
        if (!hasGateway) {
            issues.push({ path: ["security", "servicePorts"], value: security.servicePorts, expected: "clients (the default) unless the stack has a vllm-fleet:gateway, through which clients then reach the services" });
        } else if (!security.firewall) {
            issues.push({ path: ["security", "servicePorts"], value: security.servicePorts, expected: "clients (the default) unless vllm-fleet:security.firewall is true: the firewall's rules keep clients off the services' ports" });
        }
    }
    return issues;
}

/**
 * The preview's warning about the ports that face clients (`ports`: the gateway's and the services'
 * API ports) when everyone may open connections to them: without the firewall (nothing filters
 * them), or with it and `clients` left at everyone. The API key is still required either way. None
 * when `clients` names the networks and the firewall enforces them.
 */
export function clientPortsWarning(security: SecurityConfig, ports: readonly string[]): string | undefined {
    if ((security.firewall && !clientsAreEveryone(security.clients)) || ports.length === 0) {
        return undefined;
    }
    const named = ports.length === 1 ? `port ${ports[0]} accepts` : `ports ${ports.slice(0, -1).join(", ")} and ${ports[ports.length - 1]} accept`;
    const fix = security.firewall
        ? "set it to your clients' networks (CIDR blocks) to keep the others off"
        : "set vllm-fleet:security.firewall true and vllm-fleet:security.clients to your clients' networks (CIDR blocks) to keep the others off";
    const what = security.firewall ? `vllm-fleet:security.clients is ${security.clients.join(", ")}` : "vllm-fleet:security.firewall is off";
    return `${what}: ${named} connections from everyone (the API key is still required); ${fix}`;
}
