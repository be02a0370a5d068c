/**
 * The model from the Hugging Face Hub (`model.source: hub`): its keys, their checks and messages,
 * the secret token, and the download step in the program's graph (mocks).
 */
import { describe, expect, it } from "vitest";
import { ConfigError, SECRET_CONFIG_KEYS, hfTokenIssues, nearestKeys, parseFleetConfig, plainTextSecretIssues } from "../../infra/core/config";
import { runProgram, sparkProbeOutput, unsecret } from "./mocks";
import { sparkDuo } from "./stacks";
import { configProblems } from "./configErrors";

const duo = sparkDuo;
const SHA = "0123456789abcdef0123456789abcdef01234567";
const hubModel = (extra: Record<string, unknown> = {}) => ({ path: "/models/qwen", source: "hub", repo: "Qwen/Qwen3-8B", revision: SHA, ...extra });

const problemsOf = configProblems;

describe("model.source", () => {
    it("is path by default: nothing is downloaded, the directory is taken as it is", () => {
        const config = parseFleetConfig(duo);
        expect(config.model.hub).toBeUndefined();
        expect(config.model.sync).toBe("none");
    });

    it("hub: the repo and commit, served under the repo id, synced to the other nodes by default", () => {
        const config = parseFleetConfig({ ...duo, model: hubModel() });
        expect(config.model).toEqual({ path: "/models/qwen", servedName: "Qwen/Qwen3-8B", sync: "rsync", hub: { repo: "Qwen/Qwen3-8B", revision: SHA } });
    });

    it("hub: keeps an explicit served name and sync none (a directory every node shares)", () => {
        const config = parseFleetConfig({ ...duo, model: hubModel({ servedName: "qwen", sync: "none" }) });
        expect(config.model.servedName).toBe("qwen");
        expect(config.model.sync).toBe("none");
    });

    it("hub: takes the Hub's address (HF_ENDPOINT) without its trailing slash", () => {
        const config = parseFleetConfig({ ...duo, model: hubModel({ hubEndpoint: "http://10.0.0.5:8080/" }) });
        expect(config.model.hub).toEqual({ repo: "Qwen/Qwen3-8B", revision: SHA, endpoint: "http://10.0.0.5:8080" });
    });

    it("refuses an unknown source", () => {
        expect(problemsOf({ ...duo, model: hubModel({ source: "s3" }) })).toEqual(['  - vllm-fleet:model.source: got "s3"; expected one of "path", "hub"']);
    });
});

describe("model.repo", () => {
    it("is required with hub", () => {
        const { repo: _repo, ...model } = hubModel();
        expect(problemsOf({ ...duo, model })).toEqual([
            "  - vllm-fleet:model.repo: missing; expected a Hugging Face repo id such as Qwen/Qwen3-8B (owner/name) with vllm-fleet:model.source hub",
        ]);
    });

    it.each([
        ["no owner", "gpt2"],
        ["a path", "Qwen/Qwen3/8B"],
        ["a URL", "https://huggingface.co/Qwen/Qwen3-8B"],
        ["shell syntax", "Qwen/x;rm -rf"],
        ["a leading dash", "Qwen/-x"],
        ["a double dash", "Qwen/a--b"],
        ["a double dot", "Qwen/a..b"],
        [".git", "Qwen/model.git"],
    ])("refuses %s", (_label, repo) => {
        const [line] = problemsOf({ ...duo, model: hubModel({ repo }) });
        expect(line).toMatch(/^ {2}- vllm-fleet:model\.repo: got .*; expected a Hugging Face repo id/);
    });

    it.each([["Qwen/Qwen3.5-122B-A10B-FP8"], ["meta-llama/Llama-3.1-8B-Instruct"], ["a/b"], ["my_org/model_v1.2"]])("accepts %s", (repo) => {
        expect(parseFleetConfig({ ...duo, model: hubModel({ repo }) }).model.hub?.repo).toBe(repo);
    });
});

describe("model.revision", () => {
    it("is required with hub, saying how to find a commit", () => {
        const { revision: _revision, ...model } = hubModel();
        expect(problemsOf({ ...duo, model })).toEqual([
            "  - vllm-fleet:model.revision: missing; expected a commit of the repo (40 hex digits) with vllm-fleet:model.source hub, so every up gets the same files; " +
                "the commit of a branch: curl -s https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main | jq -r .sha",
        ]);
    });

    it("refuses a branch or a tag, which moves", () => {
        expect(problemsOf({ ...duo, model: hubModel({ revision: "main" }) })).toEqual([
            '  - vllm-fleet:model.revision: got "main"; expected a commit (40 hex digits), not a branch or tag, which moves: the same config would download other files later; ' +
                "the commit of a branch: curl -s https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main | jq -r .sha",
        ]);
        expect(problemsOf({ ...duo, model: hubModel({ revision: "v1.0", hubEndpoint: "http://mirror:8080/" }) })[0]).toContain(
            "curl -s http://mirror:8080/api/models/Qwen/Qwen3-8B/revision/main",
        );
    });

    it("refuses a short or uppercase commit", () => {
        expect(problemsOf({ ...duo, model: hubModel({ revision: SHA.slice(0, 12) }) })[0]).toContain("expected a commit (40 hex digits)");
        expect(problemsOf({ ...duo, model: hubModel({ revision: SHA.toUpperCase() }) })).toEqual([
            `  - vllm-fleet:model.revision: got "${SHA.toUpperCase()}"; expected a commit in lowercase hex (huggingface_hub takes another spelling for a branch name)`,
        ]);
    });
});

describe("model.hubEndpoint", () => {
    it.each([["huggingface.co"], ["ftp://mirror/"], ["http://user:pw@mirror"], ["http://mirror/?x=1"]])("refuses %s", (hubEndpoint) => {
        const [line] = problemsOf({ ...duo, model: hubModel({ hubEndpoint }) });
        expect(line).toMatch(/^ {2}- vllm-fleet:model\.hubEndpoint: got .*; expected an http\(s\) URL such as https:\/\/huggingface\.co/);
    });
});

describe("the Hub keys without model.source hub", () => {
    it("are refused, each naming the key that reads them", () => {
        expect(problemsOf({ ...duo, model: { path: "/models/q", repo: "Qwen/Qwen3-8B", revision: SHA, hubEndpoint: "https://hf-mirror.com" } })).toEqual([
            '  - vllm-fleet:model.repo: got "Qwen/Qwen3-8B"; expected no value: vllm-fleet:model.repo is read only with vllm-fleet:model.source hub',
            `  - vllm-fleet:model.revision: got "${SHA}"; expected no value: vllm-fleet:model.revision is read only with vllm-fleet:model.source hub`,
            '  - vllm-fleet:model.hubEndpoint: got "https://hf-mirror.com"; expected no value: vllm-fleet:model.hubEndpoint is read only with vllm-fleet:model.source hub',
        ]);
    });

    it("a misspelled one names the nearest", () => {
        expect(problemsOf({ ...duo, model: hubModel({ revison: SHA }) })[0]).toContain("did you mean vllm-fleet:model.revision?");
        expect(nearestKeys("HF_TOKEN")).toEqual(["hfToken"]);
    });

    it("reports every problem at once", () => {
        expect(problemsOf({ ...duo, model: { path: "relative", source: "hub", repo: "gpt2", revision: "main" } }).map((line) => line.split(":").slice(0, 2).join(":"))).toEqual([
            "  - vllm-fleet:model.path",
            "  - vllm-fleet:model.repo",
            "  - vllm-fleet:model.revision",
        ]);
    });
});

describe("the secret vllm-fleet:hfToken", () => {
    it("is a secret key, not part of the parsed config", () => {
        expect(SECRET_CONFIG_KEYS).toContain("hfToken");
        expect(parseFleetConfig({ ...duo, hfToken: "hf_x" })).toEqual(parseFleetConfig(duo));
    });

    it("is refused in plain text, with the command that sets it, never quoted", () => {
        const [issue] = plainTextSecretIssues("hfToken", "hf_plain_value", false);
        expect(issue.key).toBe("vllm-fleet:hfToken");
        expect(issue.expected).toContain("pulumi config set --secret hfToken");
        expect(new ConfigError([issue]).message).not.toContain("hf_plain_value");
        expect(plainTextSecretIssues("hfToken", "hf_x", true)).toEqual([]);
    });

    it("must be one token a header can carry", () => {
        expect(hfTokenIssues(undefined)).toEqual([]);
        expect(hfTokenIssues("hf_AbCdEf0123")).toEqual([]);
        const message = new ConfigError(hfTokenIssues("hf_secret\n")).message;
        expect(message).toContain("  - vllm-fleet:hfToken: got a token ending in a newline; expected one token of printable ASCII without spaces");
        expect(message).not.toContain("hf_secret");
        expect(hfTokenIssues("")[0].expected).toContain("pulumi config rm hfToken");
        expect(hfTokenIssues("hf_a b")[0].found).toBe("got a token with whitespace inside");
    });
});

describe("the program with model.source hub (mocks)", async () => {
    const fabricIps: Record<string, string> = { spark1: "192.168.200.12", spark2: "192.168.200.13" };
    const missing = (text: string) => text.replace(/### model\n[\s\S]*?### model-config\n/, "### model\nexists no\n### model-config\n");
    // Before the download the directory is missing on the first node; the download leaves it there
    // (the mock's sync lists the receiving node's probe).
    const probe = (node: string) =>
        node === "spark1" ? missing(sparkProbeOutput(fabricIps[node], "10.1.230.1")) : sparkProbeOutput(fabricIps[node.replace(/@hub$/, "")], "10.1.230.1");
    const config = { ...duo, commandRunner: "pulumi-command", model: hubModel({ hubEndpoint: "http://10.1.230.5:8080" }) };

    it("downloads on the first node, before the weight sync, the token on standard input only", async () => {
        const run = await runProgram(config, probe, { sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----", hfToken: "hf_unit_token" });
        const download = run.byName("spark1-hub-download");
        expect(run.resources.filter((resource) => resource.name.endsWith("-hub-download")).map((resource) => resource.name)).toEqual(["spark1-hub-download"]);
        const stdin = String(unsecret(download.inputs.stdin));
        expect(stdin).toContain("hf_unit_token");
        expect(stdin).toContain("REPO=");
        expect(stdin).toContain("Qwen/Qwen3-8B");
        expect(stdin).toContain("http://10.1.230.5:8080");
        expect(JSON.stringify(download.inputs.create)).not.toContain("hf_unit_token");
        expect(run.byName("spark2-weights-receive").dependencies).toContain(download.urn);
        expect(run.byName("spark2-weights-send").dependencies).toContain(download.urn);
        expect(run.outputs.model).toBe("Qwen/Qwen3-8B");
    });

    it("has no download step without it", async () => {
        const run = await runProgram({ ...duo, commandRunner: "pulumi-command" }, (node) => sparkProbeOutput(fabricIps[node], "10.1.230.1"));
        expect(run.resources.filter((resource) => resource.name.endsWith("-hub-download"))).toEqual([]);
    });
});
