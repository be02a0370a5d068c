import { describe, expect, it } from "vitest";
import { ArgsCheckReport, parseArgsCheck, parseImagePythonPath } from "../../components/serveArgsCheck";

describe("parseArgsCheck: what vllm-args-check.sh printed", () => {
    it.each<[string, string, ArgsCheckReport]>([
        [
            "accepted, with the versions and an image without PYTHONPATH",
            "pythonpath \nversions vllm=0.33.0 ray=none\naccepted\n",
            { verdict: "accepted", versions: { vllm: "0.33.0", ray: "none" } },
        ],
        [
            "unchecked, with the reason, the versions and the image's PYTHONPATH",
            "pythonpath /opt/extra:/opt/more\nversions vllm=0.17.1 ray=2.53.0\nunchecked: this vLLM cannot build its parser here (RuntimeError: Failed to infer device type)\n",
            {
                verdict: "unchecked",
                reason: "this vLLM cannot build its parser here (RuntimeError: Failed to infer device type)",
                versions: { vllm: "0.17.1", ray: "2.53.0" },
            },
        ],
        ["accepted by the check of an earlier vllm-fleet, without versions or PYTHONPATH", "accepted\n", { verdict: "accepted" }],
        [
            "a local version label",
            "pythonpath\nversions vllm=0.17.1+vllm.fleet.standin ray=2.53.0\naccepted\n",
            { verdict: "accepted", versions: { vllm: "0.17.1+vllm.fleet.standin", ray: "2.53.0" } },
        ],
    ])("%s", (_, stdout, report) => {
        expect(parseArgsCheck(stdout)).toEqual(report);
    });
});

describe("parseImagePythonPath: what image_pythonpath (image-identity.sh) printed", () => {
    it.each([
        ["pythonpath /opt/extra:/opt/more\n", "/opt/extra:/opt/more"],
        ["pythonpath \n", ""],
        ["pythonpath\n", ""],
        ["", ""],
    ])("%j is %j", (stdout, pythonPath) => {
        expect(parseImagePythonPath(stdout)).toBe(pythonPath);
    });
});
