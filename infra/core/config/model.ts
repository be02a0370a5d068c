/**
 * The schema of `vllm-fleet:model`: the model directory (never a system directory), and the Hugging
 * Face Hub keys across one another (`source: hub` with a repo and a commit). Pure.
 */
import * as path from "path";
import { z } from "zod";

/** An absolute path on a node, without NUL or line breaks. */
export const ABSOLUTE_PATH = /^\/[^\0\n\r]*$/;

/**
 * Directories of the operating system: a model path may not be one of them (it is mounted into every
 * serving container and, with `model.sync: rsync`, written to), nor lie inside a kernel file system.
 */
const SYSTEM_DIRECTORIES = new Set([
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var",
    "/usr/bin", "/usr/include", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/sbin", "/usr/share", "/usr/src",
    "/var/cache", "/var/lib", "/var/log", "/var/run", "/var/tmp",
]);
const KERNEL_FILE_SYSTEMS = ["/proc/", "/sys/", "/dev/"];

/** An absolute path without `.`, `..`, repeated or trailing slashes (`/` stays `/`). */
export function normalizeAbsolutePath(value: string): string {
    return path.posix.normalize(value).replace(/(.)\/+$/, "$1");
}

/**
 * Where an absolute path lies that no directory of the fleet on a node may be (the model's, the
 * compile caches'): the root, a system directory, or inside a kernel file system, said as "the
 * root directory", "the system directory /usr", "a path inside /proc (a kernel file system)";
 * undefined elsewhere, and for a path that is not absolute (its regex reports that).
 */
export function reservedPlace(value: string): { readonly kind: "root" | "system" | "kernel"; readonly text: string } | undefined {
    if (!ABSOLUTE_PATH.test(value)) {
        return undefined;
    }
    const normalized = normalizeAbsolutePath(value);
    if (normalized === "/") {
        return { kind: "root", text: "the root directory" };
    }
    if (SYSTEM_DIRECTORIES.has(normalized)) {
        return { kind: "system", text: `the system directory ${normalized}` };
    }
    const kernel = KERNEL_FILE_SYSTEMS.find((prefix) => normalized.startsWith(prefix));
    return kernel ? { kind: "kernel", text: `a path inside ${kernel.slice(0, -1)} (a kernel file system)` } : undefined;
}

/** Why `value` (an absolute path) cannot be a model directory, or undefined when it can. */
function modelPathProblem(value: string): string | undefined {
    const place = reservedPlace(value);
    return place && `a model directory, not ${place.text}`;
}

// A Hub repo id as huggingface_hub validates it (validate_repo_id), with the owner: owner/name.
const HUB_REPO = /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?\/[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/;
/** A commit of a Hub repo, as huggingface_hub recognizes one (REGEX_COMMIT_HASH). */
export const HUB_COMMIT = /^[0-9a-f]{40}$/;

/** Why `value` cannot be `model.hubEndpoint` (HF_ENDPOINT), or undefined when it can. */
function hubEndpointProblem(value: string): string | undefined {
    let url: URL;
    try {
        url = new URL(value);
    } catch {
        return "not a URL";
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
        return "not http(s)";
    }
    if (url.username || url.password || url.search || url.hash || /\s/.test(value)) {
        return "credentials, a query or a fragment";
    }
    return undefined;
}

/**
 * The problems of the Hub keys of `model` across one another: `repo` and `revision` with
 * `source: hub` (the revision a commit, so every `up` gets the same bytes), none of the Hub keys
 * without it. Pure.
 */
function hubIssues(model: { source: "path" | "hub"; repo?: string; revision?: string; hubEndpoint?: string }, where: string): { key: string; value: unknown; expected: string }[] {
    const issues: { key: string; value: unknown; expected: string }[] = [];
    if (model.source !== "hub") {
        for (const key of ["repo", "revision", "hubEndpoint"] as const) {
            if (model[key] !== undefined) {
                issues.push({ key, value: model[key], expected: `no value: ${where}.${key} is read only with ${where}.source hub` });
            }
        }
        return issues;
    }
    if (model.repo === undefined) {
        issues.push({ key: "repo", value: undefined, expected: `a Hugging Face repo id such as Qwen/Qwen3-8B (owner/name) with ${where}.source hub` });
    }
    const find = `the commit of a branch: curl -s ${(model.hubEndpoint ?? "https://huggingface.co").replace(/\/+$/, "")}/api/models/${model.repo ?? "<owner>/<name>"}/revision/main | jq -r .sha`;
    if (model.revision === undefined) {
        issues.push({ key: "revision", value: undefined, expected: `a commit of the repo (40 hex digits) with ${where}.source hub, so every up gets the same files; ${find}` });
    } else if (!HUB_COMMIT.test(model.revision)) {
        const expected = /^[0-9A-Fa-f]{40}$/.test(model.revision)
            ? "a commit in lowercase hex (huggingface_hub takes another spelling for a branch name)"
            : `a commit (40 hex digits), not a branch or tag, which moves: the same config would download other files later; ${find}`;
        issues.push({ key: "revision", value: model.revision, expected });
    }
    return issues;
}

/**
 * The schema of a model: the top-level `vllm-fleet:model`, or a service's (`where`: how the messages
 * name it, `model` below `vllm-fleet:services[i]`).
 */
export function modelSchemaAt(where: string) {
    return z
        .strictObject({
            path: z
                .string()
                .regex(ABSOLUTE_PATH, "an absolute path to the model directory on every node")
                .superRefine((value, context) => {
                    const problem = modelPathProblem(value);
                    if (problem) {
                        context.addIssue({ code: "custom", message: `${problem} (it is mounted into every serving container)` });
                    }
                }),
            servedName: z.string().min(1).max(256).optional(),
            /**
             * `rsync`: copy the first node's model directory to the others over the fabric. Default:
             * `none`, and `rsync` with `source: hub` (the download is on the first node only).
             */
            sync: z.enum(["none", "rsync"]).optional(),
            /** `path`: the directory is there already; `hub`: downloaded into it from the Hugging Face Hub. */
            source: z.enum(["path", "hub"]).default("path"),
            /** The Hub repo id (`owner/name`), with `source: hub`. */
            repo: z
                .string()
                .regex(HUB_REPO, "a Hugging Face repo id such as Qwen/Qwen3-8B (owner/name: letters, digits, '-', '_', '.')")
                .refine((value) => !/--|\.\.|\.git$/.test(value), "a Hugging Face repo id without '--' or '..' and not ending in .git")
                .optional(),
            /** The commit of the repo to download (40 hex digits), with `source: hub`. */
            revision: z.string().optional(),
            /** The Hub's address (HF_ENDPOINT): a mirror or a Hub of your own; default https://huggingface.co. */
            hubEndpoint: z
                .string()
                .refine((value) => hubEndpointProblem(value) === undefined, "an http(s) URL such as https://huggingface.co (no query, no credentials)")
                .optional(),
        })
        .superRefine((model, context) => {
            for (const issue of hubIssues(model, where)) {
                context.addIssue({ code: "custom", path: [issue.key], message: issue.expected, params: { value: issue.value } });
            }
        })
        .transform((model) => {
            const modelPath = normalizeAbsolutePath(model.path);
            const hub =
                model.source === "hub" && model.repo !== undefined && model.revision !== undefined
                    ? { repo: model.repo, revision: model.revision, ...(model.hubEndpoint ? { endpoint: model.hubEndpoint.replace(/\/+$/, "") } : {}) }
                    : undefined;
            return {
                path: modelPath,
                servedName: model.servedName ?? hub?.repo ?? path.posix.basename(modelPath),
                sync: model.sync ?? (hub ? "rsync" : "none"),
                ...(hub ? { hub } : {}),
            };
        });
}

/** The top-level `vllm-fleet:model`. */
export const modelSchema = modelSchemaAt("vllm-fleet:model");
