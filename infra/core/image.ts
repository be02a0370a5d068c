/**
 * Images: their names (a tag, or a pin by registry digest), what a node's image store is, and how the
 * nodes' copies of an image are compared: by content identity (components/scripts/image-identity.sh),
 * never by Docker's id, which the classic and the containerd image stores make differently. Pure.
 */
import { ImageStoreFacts, NodeFacts } from "./facts";

/** The digest a pinned image name carries: `sha256:` and 64 lowercase hex digits. */
export const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** An image name split as Docker reads it: `[registry[:port]/]repository[:tag][@digest]`. */
export interface ImageName {
    /** Everything before the tag and the digest (registry and repository). */
    readonly repository: string;
    readonly tag?: string;
    /** `sha256:<64 hex>` when the name is pinned by digest. */
    readonly digest?: string;
}

/** Splits an image name (one the config accepted) into repository, tag and digest. */
export function parseImageName(name: string): ImageName {
    const at = name.indexOf("@");
    const reference = at < 0 ? name : name.slice(0, at);
    const digest = at < 0 ? undefined : name.slice(at + 1);
    // A tag follows the last ':' after the last '/' (a ':' before it is a registry's port).
    const colon = reference.lastIndexOf(":");
    const hasTag = colon > reference.lastIndexOf("/");
    return {
        repository: hasTag ? reference.slice(0, colon) : reference,
        ...(hasTag ? { tag: reference.slice(colon + 1) } : {}),
        ...(digest !== undefined ? { digest } : {}),
    };
}

/**
 * What is wrong with the digest of an image name (`repo@<digest>`), or undefined when it has none or
 * a well-formed one: the config's check names the key with it.
 */
export function imageDigestProblem(name: string): string | undefined {
    const at = name.indexOf("@");
    if (at < 0) {
        return undefined;
    }
    const digest = name.slice(at + 1);
    if (DIGEST.test(digest)) {
        return undefined;
    }
    return (
        `a digest pin as repo@sha256:<64 lowercase hex digits> (also repo:tag@sha256:...), as \`docker image inspect --format '{{join .RepoDigests "\\n"}}'\` ` +
        `or the registry prints it; ${JSON.stringify(digest)} is not one`
    );
}

/** The first 12 hex digits of a digest or identity (`sha256:` left out), as messages show them. */
export function shortDigest(digest: string): string {
    return digest.replace(/^sha256:/, "").slice(0, 12);
}

/** The digests (`sha256:...`) of a node's RepoDigests (`name@sha256:...`). */
export function repoDigestsOf(repoDigests: readonly string[]): string[] {
    return repoDigests.map((entry) => entry.slice(entry.indexOf("@") + 1)).filter((digest) => DIGEST.test(digest));
}

/** How a message names a node's image store: `containerd (overlayfs)`, `classic (overlay2)`. */
export function describeImageStore(store: ImageStoreFacts): string {
    return `${store.kind} (${store.driver || "driver unknown"})`;
}

/**
 * A warning when the nodes keep images in different stores (Docker's classic store and its
 * containerd store, the default of fresh Docker 29 installs): served all the same, since images are
 * compared by content, but `docker images` shows other ids on them. Undefined when they agree or the
 * read could not tell.
 */
export function imageStoreWarning(nodes: readonly { readonly name: string; readonly facts: Pick<NodeFacts, "imageStore"> }[]): string | undefined {
    const known = nodes.filter((node) => node.facts.imageStore !== undefined);
    const kinds = new Set(known.map((node) => node.facts.imageStore!.kind));
    if (kinds.size < 2) {
        return undefined;
    }
    return (
        `the nodes keep images in different Docker image stores: ${known.map((node) => `${node.name} ${describeImageStore(node.facts.imageStore!)}`).join(", ")}; ` +
        `served all the same (vllm-fleet compares images by content, not by Docker's image id, which the two stores make differently), ` +
        `but \`docker images\` shows other ids for the same image on them; to make them alike, the fix is on the nodes (Docker's "containerd-snapshotter" feature in /etc/docker/daemon.json)`
    );
}

/**
 * The preview's warning about an image named by a tag alone: the tag may move (nightly builds), and
 * nothing says which build the stack means. It names what the first node has, so that the stack can
 * pin it: its registry digest where it has one, else its content identity. Undefined for a name
 * pinned by digest.
 */
export function unpinnedImageWarning(
    image: { readonly name: string; readonly key: string },
    first: { readonly name: string; readonly facts: Pick<NodeFacts, "imageIdentity" | "imageRepoDigests"> },
): string | undefined {
    const parsed = parseImageName(image.name);
    if (parsed.digest) {
        return undefined;
    }
    const lead = `${image.key} ${image.name} is a tag, which can move to another build (nightly images do)`;
    const { imageIdentity, imageRepoDigests } = first.facts;
    if (!imageIdentity) {
        return `${lead}; ${first.name} has no such image yet: pin it by digest (${parsed.repository}@sha256:...) to say which build the stack means`;
    }
    const pinned = (imageRepoDigests ?? []).find((entry) => entry.slice(0, entry.indexOf("@")) === parsed.repository) ?? imageRepoDigests?.[0];
    if (pinned) {
        const digest = pinned.slice(pinned.indexOf("@") + 1);
        const named = `${parsed.repository}${parsed.tag ? `:${parsed.tag}` : ""}@${digest}`;
        return `${lead}; ${first.name} has it as ${named}: set ${image.key} to that to pin this build`;
    }
    return (
        `${lead}; ${first.name} has it with content identity ${shortDigest(imageIdentity)} and no registry digest (built or loaded there, not pulled): ` +
        `push it to a registry and set ${image.key} to name@sha256:<its digest> to pin it`
    );
}
