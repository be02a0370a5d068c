/**
 * hostPrep: what is done to each node before its serving containers start (config `hostPrep`, off by
 * default): today, dropping the page cache (components/scripts/drop-caches.sh). It runs when the
 * serving containers are (re)created, not on an `up` with nothing to do: its trigger is a digest of
 * every node's serving container as planned (their revisions included, observe.ts), so a new
 * revision, image or setting anywhere runs it again on every node (the Ray workers follow a new
 * head, the mp ranks restart as one group). Pure.
 */
import * as crypto from "crypto";
import { FleetConfig } from "../config";
import { ContainerSpec } from "../containerSpec";

/** The preparation of one node. */
export interface HostPrepPlan {
    readonly node: string;
    /** Drop the page cache (sync; echo 3 > /proc/sys/vm/drop_caches). */
    readonly dropCaches: boolean;
    /** Changes whenever the serving containers are (re)created: the preparation runs again then. */
    readonly trigger: string;
}

/** Each node's preparation with hostPrep.dropCaches; none without. */
export function planHostPrep(config: Pick<FleetConfig, "hostPrep">, nodes: readonly string[], servingSpecs: readonly ContainerSpec[]): HostPrepPlan[] {
    if (!config.hostPrep.dropCaches) {
        return [];
    }
    const trigger = crypto.createHash("sha256").update(JSON.stringify(servingSpecs)).digest("hex").slice(0, 16);
    return nodes.map((node) => ({ node, dropCaches: true, trigger }));
}
