/**
 * A delivered image that disappears from a node is delivered again by the next `up`: the mark each
 * delivery step leaves (components/scripts/image-mark.sh), the read of it (live.sh, observe.ts), the
 * decision (observe.ts deliveryRevision), and the program under mocks: a run with every image still
 * there changes nothing, one with an image gone replaces that node's step only and says why.
 */
import { describe, expect, it, vi } from "vitest";
import { bashCommand, readScript, scriptProgram } from "../../components/shell";
import { deliveryMark, deliveryMarkDir } from "../../infra/core/names";
import { DeliveryMark, deliveryRevision, parseObservation } from "../../infra/core/observe";
import { FAKE_IMAGE_IDENTITY, runWithFakeDocker } from "./fakeDocker";
import { GATEWAY, BIG, CODER, fleet, probe as fleetProbe } from "./fleetFixtures";
import { changedInputs, deliveredAfter, liveAfter, runProgram, sparkProbeOutput } from "./mocks";
import { sparkDuo } from "./stacks";

const identity = `sha256:${"a".repeat(64)}`;
const other = `sha256:${"b".repeat(64)}`;
const digest = `sha256:${"d".repeat(64)}`;
let counter = 0;
const fresh = () => `new${++counter}`;
const on = (...delivered: DeliveryMark[]) => ({ node: "spark2", delivered });
const mark = (image: string, state: Partial<DeliveryMark> = {}): DeliveryMark => ({ image, revision: "r1", identity, repoDigests: [], ...state });

describe("the revision of an image's delivery step (deliveryRevision)", () => {
    const copy = { image: "vllm:test", copyFrom: "spark1", identity };

    it("keeps the revision the step left while the node has the image: copy (the source's content), pull by tag, pull by digest", () => {
        expect(deliveryRevision(on(mark("vllm:test")), copy, fresh)).toEqual({ revision: "r1" });
        expect(deliveryRevision(on(mark("vllm:test")), { image: "vllm:test", pull: true }, fresh)).toEqual({ revision: "r1" });
        const pinned = `registry.lan:5000/vllm@${digest}`;
        expect(deliveryRevision(on(mark(pinned, { repoDigests: [pinned] })), { image: pinned, pull: true }, fresh)).toEqual({ revision: "r1" });
    });

    it("gives a first delivery (no mark) a new revision and says nothing; the next run keeps the one its step left", () => {
        const first = deliveryRevision(on(), copy, fresh);
        expect(first.revision).toMatch(/^new\d+$/);
        expect(first.finding).toBeUndefined();
        expect(deliveryRevision({ node: "spark2" }, { image: "vllm:test", pull: true }, fresh).finding).toBeUndefined();
        // The step left its revision in the mark: the run after it keeps it (no second run of the step).
        expect(deliveryRevision(on(mark("vllm:test", { revision: first.revision })), copy, fresh)).toEqual({ revision: first.revision });
    });

    it("delivers again, saying why, an image that is not there any more", () => {
        const gone = mark("vllm:test", { identity: undefined });
        const copied = deliveryRevision(on(gone), copy, fresh);
        expect(copied.revision).toMatch(/^new\d+$/);
        expect(copied.finding).toBe("node spark2: image vllm:test is not there any more; up copies it again there from spark1");
        const pulled = deliveryRevision(on(gone), { image: "vllm:test", pull: true }, fresh);
        expect(pulled.revision).toMatch(/^new\d+$/);
        expect(pulled.finding).toBe("node spark2: image vllm:test is not there any more; up pulls it again there");
    });

    it("copies again where the node holds other content under the name than the source, and pulls again a pin the node no longer knows", () => {
        const changed = deliveryRevision(on(mark("vllm:test", { identity: other })), copy, fresh);
        expect(changed.revision).toMatch(/^new\d+$/);
        expect(changed.finding).toBe(`node spark2: image vllm:test holds other content (${"b".repeat(12)}) than spark1's (${"a".repeat(12)}); up copies it again there from spark1`);
        const pinned = `registry.lan:5000/vllm@${digest}`;
        const unknown = deliveryRevision(on(mark(pinned, { repoDigests: [`registry.lan:5000/vllm@${other}`] })), { image: pinned, pull: true }, fresh);
        expect(unknown.finding).toBe(`node spark2: image ${pinned} is not known there by ${digest} any more; up pulls it again there`);
    });

    it("looks at the mark of that image only", () => {
        const result = deliveryRevision(on(mark("router:1", { revision: "r7" })), copy, fresh);
        expect(result.revision).toMatch(/^new\d+$/);
        expect(result.finding).toBeUndefined();
    });
});

describe("the marks on a node (image-mark.sh, live.sh's delivered section)", () => {
    const markFile = deliveryMark("spark-duo", "vllm:test");

    it("are one file per stack and image under the home", () => {
        expect(markFile.startsWith(`${deliveryMarkDir("spark-duo")}/`)).toBe(true);
        expect(deliveryMark("spark-duo", "router:1")).not.toBe(markFile);
        expect(deliveryMarkDir("other")).not.toBe(deliveryMarkDir("spark-duo"));
        expect(deliveryMarkDir("spark-duo")).toMatch(/^\.cache\/vllm-fleet\/images-delivered\/[0-9a-f]{12}$/);
    });

    it("are read back with the image as the node has it now: there, or gone", () => {
        // router:1 is gone from the node (the stand-in has no such image), vllm:test is there.
        const program =
            scriptProgram(["image-identity", "image-mark"], {}) +
            `\nmark_delivered ${markFile} r1 vllm:test && mark_delivered ${deliveryMark("spark-duo", "router:1")} r2 router:1` +
            `\necho '### delivered'; delivery_marks ${deliveryMarkDir("spark-duo")}`;
        const there = runWithFakeDocker(bashCommand(program), { images: { "router:1": "" } });
        expect(there.status).toBe(0);
        const read = parseObservation("spark2", there.stdout).delivered;
        expect(read).toEqual(
            expect.arrayContaining([
                { image: "vllm:test", revision: "r1", identity: FAKE_IMAGE_IDENTITY, repoDigests: [] },
                { image: "router:1", revision: "r2", repoDigests: [] },
            ]),
        );
        expect(read).toHaveLength(2);
    });

    it("are left by the pull once the image is there, not by a failed one", () => {
        const pull = (docker: Parameters<typeof runWithFakeDocker>[1]) =>
            runWithFakeDocker(
                bashCommand(
                    scriptProgram(["docker-state", "image-identity", "image-mark", "image-pull"], { IMAGE: "vllm:test", DIGEST: "", IMAGE_KEY: "vllm-fleet:image.name", MARK: markFile, REVISION: "r5" }) +
                        `\ncat "$HOME/${markFile}" 2>/dev/null || true`,
                ),
                docker,
            );
        const pulled = pull({});
        expect(pulled.status).toBe(0);
        expect(pulled.stdout).toContain(`image-pulled vllm:test ${FAKE_IMAGE_IDENTITY}\nr5 vllm:test\n`);
        const failed = pull({ pullError: "manifest for vllm:test not found: manifest unknown: manifest unknown" });
        expect(failed.status).not.toBe(0);
        expect(failed.stdout).not.toContain("r5 vllm:test");
    });

    it("are listed by the read of every node (live.sh)", () => {
        expect(readScript("live")).toContain('delivery_marks "$DELIVERY_MARKS"');
    });
});

describe("the program redelivers a vanished image, and only that (mocks)", async () => {
    const duo = { ...sparkDuo, containerDriver: "ssh", commandRunner: "builtin" };
    const probe = (node: string) => sparkProbeOutput(node === "spark1" ? "192.168.200.12" : "192.168.200.13", node === "spark1" ? "10.1.230.180" : "10.1.230.181");

    describe.each([
        ["copy", { name: "vllm:test", source: "copy" }, ["spark2-image"]],
        ["pull by tag", { name: "vllm:test", source: "pull" }, ["spark1-image", "spark2-image"]],
        ["pull by digest", { name: `registry.lan:5000/vllm@${digest}`, source: "pull" }, ["spark1-image", "spark2-image"]],
    ])("%s", async (_, image, steps) => {
        const config = { ...duo, image };
        const first = await runProgram(config, probe);
        const live = liveAfter(first);

        it("delivers with a revision that the mark takes, and changes nothing on the next run while the image stays", async () => {
            expect(first.resources.filter((resource) => resource.name.endsWith("-image")).map((resource) => resource.name)).toEqual(steps);
            // Replaced by creating first: what takes the identity it reports is not replaced with it.
            expect(steps.map((step) => first.byName(step).inputs.createBeforeReplace)).toEqual(steps.map(() => true));
            expect(changedInputs(first, await runProgram(config, probe, undefined, live))).toEqual([]);
        });

        it("replaces the step of the node that lost the image, and nothing else, saying why", async () => {
            const pulumi = await import("@pulumi/pulumi");
            const warn = vi.spyOn(pulumi.log, "warn");
            try {
                const gone = (node: string) => (node === "spark2" ? live(node).replace(deliveredAfter(first, node).join("\n"), deliveredAfter(first, node, [image.name]).join("\n")) : live(node));
                expect(gone("spark2")).not.toBe(live("spark2"));
                const again = await runProgram(config, probe, undefined, gone);
                expect(changedInputs(first, again)).toEqual(["spark2-image"]);
                const said = warn.mock.calls.map((call) => String(call[0]));
                expect(said).toContainEqual(expect.stringMatching(new RegExp(`^node spark2: image ${image.name.replace(/[.]/g, "\\.")} is not there any more; up (copies|pulls) it again there`)));
            } finally {
                warn.mockRestore();
            }
        });
    });

    it("the gateway's pulled image too", async () => {
        const config = fleet([BIG, CODER], { ...GATEWAY, image: { name: "vllm/vllm-router:0.1.17", source: "pull" } });
        const first = await runProgram(config, fleetProbe);
        // The coder service's watchdog runs on its first node, spark3.
        const live = liveAfter(first, (resource) => (resource.startsWith("coder-") ? "spark3" : "spark1"));
        expect(changedInputs(first, await runProgram(config, fleetProbe, undefined, live))).toEqual([]);
        const gone = (node: string) => (node === "spark3" ? live(node).replace(deliveredAfter(first, node).join("\n"), deliveredAfter(first, node, ["vllm/vllm-router:0.1.17"]).join("\n")) : live(node));
        expect(changedInputs(first, await runProgram(config, fleetProbe, undefined, gone))).toEqual(["spark3-gateway-image"]);
    });
});
