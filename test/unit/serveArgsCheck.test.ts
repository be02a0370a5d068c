import { describe, expect, it } from "vitest";
import { ArgsCheckReport, parseArgsCheck } from "../../components/serveArgsCheck";

describe("parseArgsCheck: what vllm-args-check.sh printed", () => {
    it.each<[string, string, ArgsCheckReport]>([
        [
            "accepted, with the versions and an image without PYTHONPATH",
            "pythonpath \nversions vllm=0.33.0 ray=none\naccepted\n",
            { verdict: "accepted", versions: { vllm: "0.33.0", ray: "none" }, imagePythonPath: "" },
        ],
        [
            "unchecked, with the reason, the versions and the image's PYTHONPATH",
            "pythonpath /opt/extra:/opt/more\nversions vllm=0.17.1 ray=2.53.0\nunchecked: this vLLM cannot build its parser here (RuntimeError: Failed to infer device type)\n",
            {
                verdict: "unchecked",
                reason: "this vLLM cannot build its parser here (RuntimeError: Failed to infer device type)",
                versions: { vllm: "0.17.1", ray: "2.53.0" },
                imagePythonPath: "/opt/extra:/opt/more",
            },
        ],
        ["accepted by the check of an earlier vllm-fleet, without versions or PYTHONPATH", "accepted\n", { verdict: "accepted", imagePythonPath: "" }],
        [
            "a local version label",
            "pythonpath\nversions vllm=0.17.1+vllm.fleet.standin ray=2.53.0\naccepted\n",
            { verdict: "accepted", versions: { vllm: "0.17.1+vllm.fleet.standin", ray: "2.53.0" }, imagePythonPath: "" },
        ],
    ])("%s", (_, stdout, report) => {
        expect(parseArgsCheck(stdout)).toEqual(report);
    });
});
