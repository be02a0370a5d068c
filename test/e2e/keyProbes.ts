/**
 * The probes of "nobody gets in without the key" that the e2e files share: every route the supported
 * vLLM versions serve (test/fixtures/vllm-routes.json, read from their source), asked without the
 * key, on a service's API or through the gateway.
 */
import * as fs from "fs";
import * as path from "path";

/** The routes vLLM serves, per version, as test/fixtures/vllm-routes.json lists them. */
const ROUTES = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "fixtures", "vllm-routes.json"), "utf8")) as { versions: Record<string, string[]> };

/** Open without the key: the liveness probes (components/scripts/vllm_fleet_key.py OPEN_PATHS). */
export const OPEN_ROUTES = ["/health", "/ping"] as const;

/** Every route of every supported version, a path template's parameter filled in. */
export const VLLM_ROUTES: readonly string[] = [...new Set(Object.values(ROUTES.versions).flat())].map((route) => route.replace(/\{[^}]+\}/g, "resp_probe")).sort();

/** The HTTP status of one request (0: no answer). */
export async function statusOf(url: string, init: RequestInit = {}): Promise<number> {
    try {
        const response = await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) });
        await response.arrayBuffer();
        return response.status;
    } catch {
        return 0;
    }
}

/**
 * Every route of {@link VLLM_ROUTES} but the open ones, asked at `root` (no /v1) without a key (GET
 * and POST), and with a wrong one: the routes that answered anything but `expected`, with what.
 */
export async function answeredWithoutKey(root: string, expected = 401): Promise<string[]> {
    const asked = VLLM_ROUTES.filter((route) => !(OPEN_ROUTES as readonly string[]).includes(route));
    const wrong = { Authorization: "Bearer not-the-key" };
    const answers: { what: string; status: number }[] = [];
    // A route at a time (its three requests at once), as a client would probe them.
    for (const route of asked) {
        answers.push(
            ...(await Promise.all([
                statusOf(`${root}${route}`).then((status) => ({ what: `GET ${route}`, status })),
                statusOf(`${root}${route}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }).then((status) => ({ what: `POST ${route}`, status })),
                statusOf(`${root}${route}`, { method: "POST", headers: { "Content-Type": "application/json", ...wrong }, body: "{}" }).then((status) => ({
                    what: `POST ${route} (a wrong key)`,
                    status,
                })),
            ])),
        );
    }
    return answers.filter((answer) => answer.status !== expected).map((answer) => `${answer.what}: ${answer.status}`);
}
