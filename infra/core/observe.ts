/**
 * The fleet as it is on the hosts, read at the start of every `pulumi preview` and `up`
 * (components/observer.ts runs probe.sh and live.sh on every node), and what follows from it.
 * Pure: parsing and the reconciliation decisions (reconcile.ts) are tested without hosts or Pulumi.
 *
 * Reconciliation works through one label, `vllm-fleet.revision`, on each serving container (and a
 * token file beside `vllm serve` in the Ray head). A container found alive keeps the revision it
 * carries, so its inputs do not change and Pulumi leaves it alone; a container found dead, stuck
 * restarting or missing gets a new revision, so its inputs change and Pulumi replaces it, and
 * whatever depends on it follows through its inputs. A first deployment simply gets new revisions.
 */
import { FleetError } from "./errors";
import { NodeFacts, parseProbeOutput, splitSections } from "./facts";
import { parseImageName, shortDigest } from "./image";
import { ServiceContainers } from "./names";

/** One container of the stack on a node, as `docker inspect` shows it. */
export interface LiveContainer {
    readonly name: string;
    readonly id: string;
    readonly status: string;
    readonly running: boolean;
    readonly restarting: boolean;
    readonly exitCode: number;
    readonly restartCount: number;
    readonly startedAt: string;
    readonly labels: Readonly<Record<string, string>>;
    /** The image as the container was started with it (`.Config.Image`). */
    readonly image?: string;
    /** Its command's arguments (`.Args`): an mp rank's are its keeper's, then `vllm`'s (`serve` first). */
    readonly args?: readonly string[];
}

/**
 * A container on a node that this stack does not own but would touch: another stack's (its label
 * `vllm-fleet.stack`), or one without that label under a name this stack uses.
 */
export interface ForeignContainer {
    readonly name: string;
    /** The stack that owns it ("" when it carries no vllm-fleet label). */
    readonly stack: string;
    /** Docker's words for its state, e.g. `Up 3 hours`, `Exited (137) 2 minutes ago`. */
    readonly status: string;
}

/** What one read of a node found. */
export interface NodeObservation {
    readonly node: string;
    readonly facts: NodeFacts;
    /** This stack's containers (label vllm-fleet.stack = the stack). */
    readonly containers: readonly LiveContainer[];
    /** Containers of others that this stack would touch (none: absent or empty). */
    readonly foreign?: readonly ForeignContainer[];
    /** `vllm serve` inside the Ray head (ray executor, first node only). */
    readonly serve?: { readonly running: boolean; readonly token: string; readonly args?: readonly string[] };
    /**
     * The arguments of `vllm` (`serve` first) that the last start left in each other running Ray
     * head of the stack on this node, by container: what a service that left the config serves.
     */
    readonly serveArgs?: Readonly<Record<string, readonly string[]>>;
    /** The API as the first node answers it: /health's status and one completion. */
    readonly endpoint?: { readonly health: string; readonly completionOk: boolean; readonly detail: string };
    /** The watchdog's recent events (JSON text), when it runs on this node. */
    readonly watchdog?: string;
    /** Ray's live nodes as the head reports them (`npm run status` only): fabric address and GPUs. */
    readonly rayNodes?: readonly { readonly ip: string; readonly gpus: number }[];
    /** The revision security.firewall's rules left on this node ("" when none are there). */
    readonly firewall?: string;
    /** The marks this stack's image deliveries left on this node, each with the image as it is now. */
    readonly delivered?: readonly DeliveryMark[];
}

/** The mark an image delivery step left on a node (components/scripts/image-mark.sh), and the image there now. */
export interface DeliveryMark {
    readonly image: string;
    /** The revision of the step that left it. */
    readonly revision: string;
    /** The image's content identity on the node now (image-identity.sh); absent: no such image there. */
    readonly identity?: string;
    /** The registry digests the node knows the image by now (`name@sha256:...`). */
    readonly repoDigests: readonly string[];
}

/** Parses what probe.sh followed by live.sh printed on `node`. */
export function parseObservation(node: string, output: string): NodeObservation {
    const sections = splitSections(output);
    const containers: LiveContainer[] = [];
    for (const line of (sections.get("containers") ?? "").split("\n")) {
        if (!line.trim().startsWith("{")) {
            continue;
        }
        const raw = JSON.parse(line) as Omit<LiveContainer, "labels" | "args"> & { labels: Record<string, string> | null; args?: string[] | null };
        containers.push({ ...raw, name: raw.name.replace(/^\//, ""), labels: raw.labels ?? {}, args: raw.args ?? undefined });
    }
    const serveText = sections.get("serve");
    const serve =
        serveText === undefined
            ? undefined
            : { running: /^process yes$/m.test(serveText), token: /^token (\S*)$/m.exec(serveText)?.[1] ?? "", args: argsList(/^args (.*)$/m.exec(serveText)?.[1]) };
    const serveArgs: Record<string, readonly string[]> = {};
    for (const [name, text] of (sections.get("serve-args") ?? "").split("\n").map((line) => line.split("\t"))) {
        const args = argsList(text);
        if (name?.trim() && args) {
            serveArgs[name.trim()] = args;
        }
    }
    const endpointText = sections.get("endpoint");
    const endpoint =
        endpointText === undefined
            ? undefined
            : {
                  health: /^health (.*)$/m.exec(endpointText)?.[1]?.trim() ?? "none",
                  completionOk: /^completion ok$/m.test(endpointText),
                  detail: /^completion fail (.*)$/m.exec(endpointText)?.[1]?.trim() ?? "",
              };
    const watchdog = sections.get("watchdog")?.trim() || undefined;
    const rayText = sections.get("ray-nodes");
    const rayNodes =
        rayText === undefined
            ? undefined
            : rayText
                  .split("\n")
                  .map((line) => /^(\S+) (\d+)$/.exec(line.trim()))
                  .filter((match): match is RegExpExecArray => match !== null)
                  .map((match) => ({ ip: match[1], gpus: Number(match[2]) }));
    const firewallText = sections.get("firewall");
    const firewall = firewallText === undefined ? undefined : firewallText.trim();
    const delivered = parseDeliveryMarks(sections.get("delivered") ?? "");
    // Exactly name, stack and status: a line of anything else (a message that strayed into the
    // section) names no container.
    const foreign = (sections.get("foreign") ?? "")
        .split("\n")
        .map((line) => line.split("\t"))
        .filter((fields) => fields.length === 3 && fields[0].trim() !== "")
        .map(([name, stack, status]) => ({ name: name.trim().replace(/^\//, ""), stack, status: status.trim() }));
    return { node, facts: parseProbeOutput(output), containers, foreign, serve, serveArgs, endpoint, watchdog, rayNodes, firewall, delivered };
}

/** The `delivered` section: `mark <revision> <image>`, then that image's facts (image_facts), per mark. */
function parseDeliveryMarks(text: string): DeliveryMark[] {
    const marks: { image: string; revision: string; identity?: string; repoDigests: string[] }[] = [];
    for (const line of text.split("\n")) {
        const [word, first, second] = line.trim().split(/\s+/);
        const current = marks[marks.length - 1];
        if (word === "mark" && first && second) {
            marks.push({ image: second, revision: first, repoDigests: [] });
        } else if (word === "identity" && first && current) {
            current.identity = first;
        } else if (word === "repo-digest" && first && current) {
            current.repoDigests.push(first);
        }
    }
    return marks;
}

/** A JSON list of strings (the arguments a start left), or undefined for anything else. */
function argsList(text: string | undefined): readonly string[] | undefined {
    try {
        const value: unknown = JSON.parse(text ?? "");
        return Array.isArray(value) && value.every((arg) => typeof arg === "string") ? value : undefined;
    } catch {
        return undefined;
    }
}

/**
 * What a read found of one service: the stack's containers narrowed to the service's own (the other
 * services of the stack are not this service's to judge).
 */
export function ofService(observation: NodeObservation, containers: ServiceContainers): NodeObservation {
    const own = [containers.ray, containers.vllm, containers.watchdog];
    return { ...observation, containers: observation.containers.filter((container) => own.includes(container.name)) };
}

/** Thrown when a node holds containers of another stack that this one would touch. */
export class OwnershipError extends FleetError {}

/**
 * Refuses to go on when a node holds a container this stack does not own but would touch (replace,
 * remove, or take the GPU and ports of): another stack's serving containers, or a container by one
 * of this stack's names without its label. One line per container, naming node, container and
 * owner; nothing has been registered yet, so nothing on any host is touched.
 */
export function checkOwnership(stack: string, observations: readonly NodeObservation[]): void {
    const lines = observations.flatMap((observation) =>
        (observation.foreign ?? []).map((container) =>
            container.stack
                ? `node ${observation.node}: container ${container.name} (${container.status}) belongs to the stack ${container.stack}, not to ${stack}; this stack touches no container of another: destroy that stack first (pulumi destroy --stack ${container.stack}) or give this one other nodes`
                : `node ${observation.node}: container ${container.name} (${container.status}) was not made by a vllm-fleet stack (no vllm-fleet.stack label) but holds a name this stack uses; remove it by hand (docker rm -f ${container.name}) or give this stack other nodes`,
        ),
    );
    if (lines.length > 0) {
        // A node seen by several services (one observation each) reports the same container each time.
        throw new OwnershipError([...new Set(lines)].join("\n"));
    }
}

/**
 * The revision of each node's firewall rules (security.firewall): the one its rules left, so an `up`
 * with nothing to do keeps them, or `fresh()` where none are there (never applied, or gone with a
 * reboot), so that `up` applies them again.
 */
export function firewallRevisions(observations: readonly NodeObservation[], fresh: () => string): Record<string, string> {
    return Object.fromEntries(observations.map((observation) => [observation.node, observation.firewall || fresh()]));
}

/** What a node should have of an image delivered to it (image.source pull or copy). */
export type DeliveryWant =
    | { readonly image: string; readonly pull: true }
    | {
          readonly image: string;
          /** The node copied from, and the content identity its image has (absent: it has none). */
          readonly copyFrom: string;
          readonly identity: string | undefined;
      };

/**
 * The revision of an image's delivery step on a node, and why it runs again if it does. The step
 * leaves a mark with its revision once the image is there (image-mark.sh); while the node still has
 * the image, the mark's revision is kept, so the step's inputs stay the same and an `up` with nothing
 * to do runs nothing. Without the image (removed, the store wiped, a new node: for a copy, the
 * content the source has; pinned, that digest; a tag, the image by that name) the step gets
 * `fresh()`, and `up` delivers the image again, on that node only. Without a mark (never
 * delivered, or delivered before marks were left) it gets `fresh()` too, without a finding: a first
 * delivery is created anyway, and the next run finds the mark its step left.
 */
export function deliveryRevision(observation: Pick<NodeObservation, "node" | "delivered">, want: DeliveryWant, fresh: () => string): { revision: string; finding?: string } {
    const mark = observation.delivered?.find((candidate) => candidate.image === want.image);
    if (!mark) {
        return { revision: fresh() };
    }
    const where = `node ${observation.node}: image ${want.image}`;
    if ("pull" in want) {
        const digest = parseImageName(want.image).digest;
        if (mark.identity && (!digest || mark.repoDigests.some((known) => known.endsWith(`@${digest}`)))) {
            return { revision: mark.revision };
        }
        return { revision: fresh(), finding: `${where} ${mark.identity ? `is not known there by ${digest} any more` : "is not there any more"}; up pulls it again there` };
    }
    if (!want.identity) {
        // The source has no image to copy: the copy step refuses, naming it.
        return { revision: fresh() };
    }
    if (mark.identity === want.identity) {
        return { revision: mark.revision };
    }
    const now = mark.identity ? `holds other content (${shortDigest(mark.identity)}) than ${want.copyFrom}'s (${shortDigest(want.identity)})` : "is not there any more";
    return { revision: fresh(), finding: `${where} ${now}; up copies it again there from ${want.copyFrom}` };
}

/** A new revision: unique per run and node (time and randomness), short. */
export function newRevision(): string {
    return `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36).padStart(4, "0")}`;
}
