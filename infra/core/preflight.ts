/**
 * Preflight: the nodes compared with one another before any container starts (the image, the model
 * directory, GPUs for TP×PP, driver and CUDA); each refusal names the node, what was expected and
 * the config key to change, or that the fix is on the node. Pure.
 */
import { PreflightError } from "./errors";
import { ModelDirFacts, NodeFacts } from "./facts";
import { parseImageName, repoDigestsOf, shortDigest } from "./image";

/**
 * The first difference between two model directories (file names, sizes, config.json content), or
 * undefined when they match. Used to refuse nodes whose weights differ from node 0's.
 */
export function firstModelDifference(reference: ModelDirFacts, other: ModelDirFacts): string | undefined {
    const theirs = new Map(other.files.map((file) => [file.name, file.bytes]));
    const ours = new Map(reference.files.map((file) => [file.name, file.bytes]));
    const names = [...new Set([...ours.keys(), ...theirs.keys()])].sort();
    for (const name of names) {
        const want = ours.get(name);
        const have = theirs.get(name);
        if (have === undefined) {
            return `${name} is missing`;
        }
        if (want === undefined) {
            return `${name} is extra`;
        }
        if (want !== have) {
            return `${name} has ${have} bytes, not ${want}`;
        }
    }
    if (reference.configSha256 !== other.configSha256) {
        return "config.json has other content";
    }
    return undefined;
}

/** Everything preflight needs to compare across nodes. */
export interface PreflightInput {
    readonly name: string;
    readonly facts: NodeFacts;
}

/** What preflight compares the nodes' facts with: the config they were read for. */
export interface PreflightOptions {
    /** vllm-fleet:image.name */
    readonly image: string;
    /** vllm-fleet:image.source; default `present`. */
    readonly imageSource?: "present" | "pull" | "copy";
    /** vllm-fleet:model.path */
    readonly modelPath: string;
    /** vllm-fleet:model.sync; default `none`. */
    readonly modelSync?: "none" | "rsync";
    /** TP×PP (vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline). */
    readonly gpusNeeded: number;
}

/**
 * What to do when TP×PP needs more GPUs than the nodes have: the keys to lower, or nodes to add (and a
 * node that shows no GPU at all named: its driver is the suspect). Shared by preflight and the fit
 * planner, which refuse the same thing.
 */
export function gpuShortageRemedy(gpus: number, nodes: readonly { readonly name: string; readonly gpus: number }[]): string {
    const blind = nodes.filter((node) => node.gpus === 0).map((node) => node.name);
    return (
        `expected at most ${gpus} (the GPUs of the nodes): set vllm-fleet:parallelism.tensor × vllm-fleet:parallelism.pipeline to ${gpus} or less, ` +
        `or add nodes to vllm-fleet:nodes` +
        (blind.length > 0 ? ` (${blind.join(", ")} ${blind.length === 1 ? "shows" : "show"} no GPU: check the driver there, nvidia-smi)` : "")
    );
}

/**
 * Cross-node checks: Docker answering, the image present with one content identity everywhere (and,
 * with a name pinned by digest and image.source present, as that registry digest), the model directory
 * present and the same everywhere, enough GPUs for TP×PP, and matching driver / CUDA major versions.
 * Throws naming node and fact, what was expected and the config key to change (or that the fix is on
 * the node), one line per problem.
 */
export function preflight(nodes: readonly PreflightInput[], options: PreflightOptions): void {
    const imageSource = options.imageSource ?? "present";
    const modelSync = options.modelSync ?? "none";
    const problems: string[] = [];
    nodes.forEach(({ name, facts }, index) => {
        if (!facts.dockerVersion) {
            problems.push(
                `node ${name}: Docker does not answer (is the user in the docker group?); the fix is on the node: start Docker there (systemctl start docker), or add the SSH user to the docker group`,
            );
        }
        if (!facts.imageIdentity) {
            const remedy =
                imageSource === "present"
                    ? `expected it there with vllm-fleet:image.source present: pull or load it on the node, or set vllm-fleet:image.source to pull (every node pulls vllm-fleet:image.name) or copy (the first node's, to the others)`
                    : imageSource === "copy" && index === 0
                      ? `expected it on the first node, which vllm-fleet:image.source copy copies from: pull or load it there, or set vllm-fleet:image.source to pull`
                      : `expected it delivered by vllm-fleet:image.source ${imageSource}: check vllm-fleet:image.name`;
            problems.push(`node ${name}: image ${options.image} is not present (docker image inspect found nothing); ${remedy}`);
        } else {
            // A name pinned by digest names one registry manifest: the node's image must be that one,
            // not merely one the name resolves to there (a local image id looks like a digest too).
            const pinned = parseImageName(options.image).digest;
            if (pinned && imageSource === "present" && !repoDigestsOf(facts.imageRepoDigests ?? []).includes(pinned)) {
                const known = facts.imageRepoDigests ?? [];
                problems.push(
                    `node ${name}: image ${options.image} is there, but not as registry digest ${shortDigest(pinned)} ` +
                        `(${known.length > 0 ? `its registry digests: ${known.join(", ")}` : "it has no registry digest there: built or loaded, not pulled"}); ` +
                        `expected the image pulled by that digest with vllm-fleet:image.source present: pull it on the node (docker pull ${options.image}), ` +
                        `or set vllm-fleet:image.source to pull, or correct the digest in vllm-fleet:image.name`,
                );
            }
        }
        if (!facts.model.exists) {
            const remedy =
                index === 0
                    ? `expected the model's directory there: set vllm-fleet:model.path to where its config.json and *.safetensors are`
                    : modelSync === "rsync"
                      ? `expected vllm-fleet:model.sync rsync to have copied ${nodes[0].name}'s there: run up again`
                      : `expected a copy on every node with vllm-fleet:model.sync none: copy it there, or set vllm-fleet:model.sync to rsync (${nodes[0].name}'s, over the fabric), or correct vllm-fleet:model.path`;
            problems.push(`node ${name}: model directory ${options.modelPath} does not exist; ${remedy}`);
        } else if (!facts.model.files.some((file) => file.name === "config.json")) {
            problems.push(
                `node ${name}: model directory ${options.modelPath} has no config.json; expected a Hugging Face model's directory (config.json and *.safetensors): set vllm-fleet:model.path to it`,
            );
        }
    });
    const reference = nodes[0];
    for (const { name, facts } of nodes.slice(1)) {
        if (reference && reference.facts.model.exists && facts.model.exists) {
            const difference = firstModelDifference(reference.facts.model, facts.model);
            if (difference) {
                const remedy =
                    modelSync === "none"
                        ? `set vllm-fleet:model.sync to rsync (${reference.name}'s copied to the others), or make the copies equal`
                        : `run up again (vllm-fleet:model.sync rsync copies ${reference.name}'s again)`;
                problems.push(`node ${name}: model directory ${options.modelPath} differs from ${reference.name}'s: ${difference}; expected the same files as ${reference.name}'s: ${remedy}`);
            }
        }
    }
    // By content identity (image-identity.sh), never by Docker's id: the same image has other ids
    // on the classic and the containerd image store, and after a save/load between them.
    const ids = new Map<string, string[]>();
    for (const { name, facts } of nodes) {
        if (facts.imageIdentity) {
            ids.set(facts.imageIdentity, [...(ids.get(facts.imageIdentity) ?? []), name]);
        }
    }
    if (ids.size > 1) {
        const remedy =
            imageSource === "pull"
                ? `pin vllm-fleet:image.name by digest (name@sha256:...) so that every node pulls the same image, or set vllm-fleet:image.source to copy (the first node's, to the others)`
                : imageSource === "copy"
                  ? `run up again (vllm-fleet:image.source copy copies the first node's where the content differs)`
                  : `set vllm-fleet:image.source to copy (the first node's, to the others), or to pull with vllm-fleet:image.name pinned by digest (name@sha256:...)`;
        const store = (name: string) => {
            const facts = nodes.find((node) => node.name === name)?.facts;
            return facts?.imageStore ? ` (${facts.imageStore.kind} store)` : "";
        };
        problems.push(
            `image ${options.image} differs across nodes by content (its layers or its config, not Docker's image id): ${[...ids.entries()]
                .map(([id, names]) => `${names.map((name) => `${name}${store(name)}`).join(", ")} have ${shortDigest(id)}`)
                .join("; ")}; expected the same image on every node: ${remedy}`,
        );
    }
    const gpus = nodes.reduce((sum, node) => sum + node.facts.gpus.length, 0);
    if (gpus < options.gpusNeeded) {
        const counts = nodes.map((node) => ({ name: node.name, gpus: node.facts.gpus.length }));
        problems.push(
            `TP×PP needs ${options.gpusNeeded} GPUs but the nodes have ${gpus} (${counts.map((node) => `${node.name}: ${node.gpus}`).join(", ")}); ` +
                gpuShortageRemedy(gpus, counts),
        );
    }
    for (const [label, pick] of [
        ["driver", (facts: NodeFacts) => facts.driverVersion],
        ["CUDA", (facts: NodeFacts) => facts.cudaVersion],
    ] as const) {
        const majors = new Map<string, string[]>();
        for (const { name, facts } of nodes) {
            const version = pick(facts);
            if (version) {
                const major = version.split(".")[0];
                majors.set(major, [...(majors.get(major) ?? []), `${name} ${version}`]);
            }
        }
        if (majors.size > 1) {
            problems.push(
                `${label} major versions differ across nodes: ${[...majors.values()].flat().join(", ")}; expected one on every node; the fix is on the nodes: install the same NVIDIA driver release on each${label === "CUDA" ? " (nvidia-smi shows the CUDA version of the driver)" : ""}`,
            );
        }
    }
    if (problems.length > 0) {
        throw new PreflightError(`preflight failed:\n  - ${problems.join("\n  - ")}`);
    }
}
