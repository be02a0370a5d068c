/** The copies over the fabric (pure): what was measured, the targets of issue 13, and their section of report.md. */
import { TargetResult } from "./targets";

/** What the fabric part of the benchmark measured between two simulated nodes (one run). */
export interface FabricThroughput {
    /** Plain TCP between the two fabric addresses (python3 sockets, one stream; the median of 5): the link's limit here. */
    readonly raw: Transfer;
    /** `docker save` on the first node into /dev/null: what the image copy can read at most. */
    readonly save: Transfer;
    /** The image copy node to node (image-receive.sh + image-send.sh as the runner starts them). */
    readonly image: Transfer;
    /** `docker load` on the second node from a file there: what the image copy can write at most. */
    readonly load: Transfer;
    /** The way before the node-to-node copy: `docker save` over SSH to this machine, over SSH into `docker load`. */
    readonly viaOperator: Transfer;
    /** The weight sync (weights-receive/send/close.sh), new files only: the median of 5. */
    readonly weights: Transfer & { readonly streams: number };
    /** Bytes that went through this machine's SSH clients during the image copy (both sessions, both ways). */
    readonly operatorBytes: number;
    /** Bytes the first node sent on its management interface (every SSH session) and on the fabric during the image copy. */
    readonly sourceInterfaceBytes: { readonly mgmt: number; readonly fabric: number };
}

export interface Transfer {
    readonly bytes: number;
    readonly seconds: number;
}

export const mibPerSecond = (transfer: Transfer) => transfer.bytes / 2 ** 20 / transfer.seconds;

/** The least share of raw TCP the image copy and the weight sync are to reach (issue 13). */
const FABRIC_TARGET = 0.7;

/** The stages an image copy passes through, each measured alone in this run (MiB/s). */
function imageStages(fabric: FabricThroughput) {
    return [
        ["docker save", mibPerSecond(fabric.save)],
        ["raw TCP", mibPerSecond(fabric.raw)],
        ["docker load", mibPerSecond(fabric.load)],
    ] as const;
}

/**
 * The fabric targets: image copy and weight sync ≥ 0.7 of raw TCP; the image copy ≥ 0.7 of its
 * slowest stage measured alone (`docker save`, the fabric, `docker load`: what any copy through
 * Docker's save and load is bound by, here or on real Sparks); no image byte through this machine.
 */
export function fabricTargets(fabric: FabricThroughput): TargetResult[] {
    const raw = mibPerSecond(fabric.raw);
    const image = mibPerSecond(fabric.image);
    const stages = imageStages(fabric);
    const slowest = stages.reduce((a, b) => (b[1] < a[1] ? b : a));
    const atLeast = (name: string, value: number, limit: number, detail: string): TargetResult => ({ target: name, value, limit, passed: value >= limit, detail });
    return [
        atLeast(
            "image copy / raw TCP over the fabric (at least)",
            image / raw,
            FABRIC_TARGET,
            `${image.toFixed(0)} / ${raw.toFixed(0)} MiB/s; ${(image / mibPerSecond(fabric.viaOperator)).toFixed(1)}× the copy through this machine (${mibPerSecond(fabric.viaOperator).toFixed(0)} MiB/s, ${(mibPerSecond(fabric.viaOperator) / raw).toFixed(2)} of raw)`,
        ),
        atLeast(
            "image copy / its slowest stage alone (at least)",
            image / slowest[1],
            FABRIC_TARGET,
            `${image.toFixed(0)} / ${slowest[1].toFixed(0)} MiB/s (${slowest[0]}); ${stages.map(([name, rate]) => `${name} ${rate.toFixed(0)}`).join(", ")} MiB/s`,
        ),
        atLeast(
            `weight sync / raw TCP over the fabric (at least; ${fabric.weights.streams} plain streams)`,
            mibPerSecond(fabric.weights) / raw,
            FABRIC_TARGET,
            `${mibPerSecond(fabric.weights).toFixed(0)} / ${raw.toFixed(0)} MiB/s`,
        ),
        {
            target: "image bytes through this machine (share of the image, at most)",
            value: fabric.operatorBytes / fabric.image.bytes,
            limit: 0.01,
            passed: fabric.operatorBytes < fabric.image.bytes / 100 && fabric.sourceInterfaceBytes.mgmt < fabric.image.bytes / 100,
            detail:
                `${(fabric.operatorBytes / 1024).toFixed(0)} KiB through this machine's SSH clients (control and output only) for a ${(fabric.image.bytes / 2 ** 20).toFixed(0)} MiB image; ` +
                `the first node sent ${(fabric.sourceInterfaceBytes.fabric / 2 ** 20).toFixed(0)} MiB on the fabric, ${(fabric.sourceInterfaceBytes.mgmt / 2 ** 20).toFixed(2)} MiB on its management interface`,
        },
    ];
}

/** Why the image copy cannot meet 0.7 of raw TCP, when one of Docker's own stages alone is below it. */
function imageLimitNote(fabric: FabricThroughput): string[] {
    const raw = mibPerSecond(fabric.raw);
    const below = imageStages(fabric).filter(([name, rate]) => name !== "raw TCP" && rate < FABRIC_TARGET * raw);
    if (below.length === 0) {
        return [];
    }
    return [
        `No image copy through Docker's save and load can reach ${FABRIC_TARGET} of raw TCP here: ${below.map(([name, rate]) => `\`${name}\` alone runs at ${(rate / raw).toFixed(2)} of it`).join(", ")}. ` +
            "A copy is bound by its slowest stage, so the second target, against that stage measured alone in this run, is the one that means the same on any machine.",
        "",
    ];
}

/** The fabric section of report.md. */
export function renderFabric(fabric: FabricThroughput): string[] {
    const row = (what: string, transfer: Transfer) =>
        `| ${what} | ${(transfer.bytes / 2 ** 20).toFixed(0)} MiB | ${transfer.seconds.toFixed(2)} s | ${mibPerSecond(transfer).toFixed(0)} MiB/s | ${(mibPerSecond(transfer) / mibPerSecond(fabric.raw)).toFixed(2)} |`;
    return [
        "## Copies over the fabric (2 simulated nodes, one run)",
        "",
        "| transfer | size | time | throughput | / raw |",
        "|---|---:|---:|---:|---:|",
        row("raw TCP, one python3 socket stream of zeros (the median of 5)", fabric.raw),
        row("`docker save` alone on the first node (to /dev/null)", fabric.save),
        row("`docker load` alone on the second node (from a file there)", fabric.load),
        row("image copy through this machine, the way before (`docker save` → ssh → this machine → ssh → `docker load`)", fabric.viaOperator),
        row("image copy, node to node (`docker save` → fabric → `docker load`)", fabric.image),
        row(`weight sync, new files (the median of 5, in turns with raw TCP): ${fabric.weights.streams} plain streams for files ≥ 1 MiB, rsync for the rest at once`, fabric.weights),
        "",
        "| target | value | limit | result | detail |",
        "|---|---:|---:|---|---|",
        ...fabricTargets(fabric).map(
            (result) => `| ${result.target} | ${result.value === undefined ? "–" : result.value.toFixed(2)} | ${result.limit} | ${result.passed ? "pass" : "**FAIL**"} | ${result.detail} |`,
        ),
        "",
        ...imageLimitNote(fabric),
    ];
}
