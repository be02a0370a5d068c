import { describe, expect, it } from "vitest";
import {
    CONFIG_KEYS,
    ConfigError,
    SECRET_CONFIG_KEYS,
    apiKeyIssues,
    editDistance,
    managedVllmFlag,
    nearestKeys,
    parseFleetConfig,
    plainTextSecretIssues,
    privateKeyProblem,
    sshPrivateKeyIssues,
    unknownKeyIssues,
} from "../../infra/core/config";
import { cidrContains, parseCidr } from "../../infra/core/net";
import { sparkDuo } from "./stacks";
import { configErrorOf } from "./configErrors";

const duo = sparkDuo;

function issuesOf(raw: Record<string, unknown>): string[] {
    return configErrorOf(raw).issues.map((issue) => issue.key);
}

describe("parseFleetConfig defaults", () => {
    const config = parseFleetConfig(duo);

    it("fills the defaults a Spark user expects", () => {
        expect(config.containerDriver).toBe("docker");
        expect(config.commandRunner).toBe("pulumi-command");
        expect(config.parallelism).toEqual({ tensor: 2, pipeline: 1 });
        expect(config.vllm.port).toBe(8000);
        expect(config.vllm.gpuMemoryUtilization).toBe(0.9);
        expect(config.ray.port).toBe(6379);
        expect(config.timeouts).toEqual({ sshConnectSeconds: 20, rayReadySeconds: 300, vllmReadySeconds: 1800 });
    });

    it("resolves SSH settings per node and names the model after its directory", () => {
        expect(config.nodes).toEqual([
            { name: "spark1", host: "10.1.230.180", user: "aurora", port: 22, hostKey: undefined },
            { name: "spark2", host: "10.1.230.181", user: "aurora", port: 22, hostKey: undefined },
        ]);
        expect(config.model).toEqual({ path: "/home/aurora/models/Qwen3.5-122B-A10B-FP8", servedName: "Qwen3.5-122B-A10B-FP8", sync: "none" });
    });

    it("takes an image pinned by digest, with or without its tag, with image.source present or pull", () => {
        const digest = `sha256:${"0123456789abcdef".repeat(4)}`;
        for (const name of [`nvcr.io/nvidia/vllm@${digest}`, `nvcr.io/nvidia/vllm:26.01-py3@${digest}`, `localhost:5000/vllm:dev@${digest}`]) {
            for (const source of ["present", "pull"] as const) {
                expect(parseFleetConfig({ ...duo, image: { name, source } }).image).toEqual({ name, source });
            }
        }
    });

    it("lets a node override the cluster-wide SSH user and port", () => {
        const custom = parseFleetConfig({ ...duo, nodes: [{ name: "a", host: "h1", user: "root", port: 2222 }] });
        expect(custom.nodes[0]).toMatchObject({ user: "root", port: 2222 });
        expect(custom.parallelism.tensor).toBe(1);
    });
});

describe("parseFleetConfig errors name the key, the value and what was expected", () => {
    it.each([
        ["a fraction above 1", { vllm: { gpuMemoryUtilization: 1.5 } }, "vllm-fleet:vllm.gpuMemoryUtilization", /got 1\.5; expected a fraction in \(0, 1\]/],
        ["a subnet with host bits", { fabric: { subnet: "192.168.200.7/24" } }, "vllm-fleet:fabric.subnet", /got "192\.168\.200\.7\/24"; expected an IPv4 CIDR block/],
        ["a relative model path", { model: { path: "models/q" } }, "vllm-fleet:model.path", /expected an absolute path/],
        ["an unknown driver", { containerDriver: "podman" }, "vllm-fleet:containerDriver", /got "podman"; expected one of "docker", "ssh"/],
        ["an image with shell syntax", { image: { name: "x;rm -rf /" } }, "vllm-fleet:image.name", /expected a Docker image reference/],
        ["an image pinned by a short digest", { image: { name: "nvcr.io/nvidia/vllm@sha256:0123abc" } }, "vllm-fleet:image.name", /expected a digest pin as repo@sha256:<64 lowercase hex digits> \(also repo:tag@sha256:\.\.\.\)/],
        ["an image pinned by another algorithm", { image: { name: `vllm:1@sha512:${"a".repeat(128)}` } }, "vllm-fleet:image.name", /expected a digest pin as repo@sha256:.*"sha512:a+" is not one/],
        [
            "a digest-pinned image copied",
            { image: { name: `nvcr.io/nvidia/vllm:26.01-py3@sha256:${"a".repeat(64)}`, source: "copy" } },
            "vllm-fleet:image.source",
            /expected pull with a name pinned by digest .*docker save\/load, which keeps tags but not registry digests.*; or copy with a tag \(nvcr\.io\/nvidia\/vllm:26\.01-py3\)/,
        ],
        ["a misspelled field", { vllm: { maxModelLength: 4096 } }, "vllm-fleet:vllm.maxModelLength", /unknown key; expected a key of vllm-fleet:vllm; did you mean vllm-fleet:vllm\.maxModelLen\?/],
        ["a port as a string", { ray: { port: "6379" } }, "vllm-fleet:ray.port", /got "6379"; expected a number/],
    ])("rejects %s", (_label, patch, key, message) => {
        let error: unknown;
        try {
            parseFleetConfig({ ...duo, ...patch });
        } catch (caught) {
            error = caught;
        }
        expect(error).toBeInstanceOf(ConfigError);
        const text = (error as Error).message;
        expect(text).toContain(`${key}:`);
        expect(text).toMatch(message);
        expect(text).toMatch(/nothing was run on any host/);
    });

    it("reports every problem at once", () => {
        expect(issuesOf({ ...duo, fabric: { subnet: "nope" }, vllm: { port: 0 } })).toEqual([
            "vllm-fleet:fabric.subnet",
            "vllm-fleet:vllm.port",
        ]);
    });

    it("reports the checks across keys with the problems of single keys", () => {
        expect(issuesOf({ ...duo, image: { name: "x;y" }, ssh: undefined, vllm: { port: 22, extraArgs: ["-tp", "2"] } })).toEqual([
            "vllm-fleet:image.name",
            "vllm-fleet:vllm.extraArgs[0]",
            "vllm-fleet:nodes[0].user",
            "vllm-fleet:nodes[1].user",
            "vllm-fleet:vllm.port",
        ]);
    });

    it("requires nodes, fabric, image and model", () => {
        expect(issuesOf({})).toEqual(["vllm-fleet:nodes", "vllm-fleet:fabric", "vllm-fleet:image", "vllm-fleet:model"]);
    });

    it("needs an SSH user for every node", () => {
        expect(issuesOf({ ...duo, ssh: undefined })).toEqual(["vllm-fleet:nodes[0].user", "vllm-fleet:nodes[1].user"]);
    });

    it("refuses duplicate node names and hosts", () => {
        const nodes = [
            { name: "spark1", host: "h1" },
            { name: "spark1", host: "h1" },
        ];
        expect(issuesOf({ ...duo, nodes })).toEqual(["vllm-fleet:nodes[1].name", "vllm-fleet:nodes[1].host"]);
    });

    it("refuses extra args that vllm-fleet sets itself", () => {
        const error = (() => {
            try {
                parseFleetConfig({ ...duo, vllm: { extraArgs: ["--enforce-eager", "--tensor-parallel-size=4"] } });
            } catch (caught) {
                return caught as ConfigError;
            }
            throw new Error("expected a ConfigError");
        })();
        expect(error.issues).toHaveLength(1);
        expect(error.issues[0].key).toBe("vllm-fleet:vllm.extraArgs[1]");
        expect(error.message).toContain("expected a flag vllm-fleet does not set itself: --tensor-parallel-size comes from vllm-fleet:parallelism.tensor");
    });

    it("needs a tool-call parser for auto tool choice, as vLLM does", () => {
        expect(issuesOf({ ...duo, vllm: { enableAutoToolChoice: true } })).toEqual(["vllm-fleet:vllm.toolCallParser"]);
    });

    it("needs TP×PP divisible by the node count with the mp executor", () => {
        expect(issuesOf({ ...duo, executor: "mp", parallelism: { tensor: 3 } })).toEqual(["vllm-fleet:parallelism"]);
        expect(parseFleetConfig({ ...duo, executor: "mp", parallelism: { tensor: 4 } }).executor).toBe("mp");
    });

    it("keeps the Ray and vLLM ports apart", () => {
        expect(issuesOf({ ...duo, vllm: { port: 6379 } })).toEqual(["vllm-fleet:ray.port"]);
    });
});

/** The ConfigError `raw` gets. */
function errorOf(raw: Record<string, unknown>): ConfigError {
    try {
        parseFleetConfig(raw);
    } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return error as ConfigError;
    }
    throw new Error("expected a ConfigError");
}

/** The problem lines of a ConfigError's message. */
function linesOf(error: ConfigError): string[] {
    return error.message.split("\n").slice(1);
}

describe("unknown keys are refused, naming the nearest known key", () => {
    it("suggests the key a misspelled top-level key was meant to be", () => {
        const [issue] = unknownKeyIssues(["tensorParalel"]);
        expect(issue.key).toBe("vllm-fleet:tensorParalel");
        expect(issue.found).toBe("unknown key");
        expect(issue.expected).toBe("a key vllm-fleet reads; did you mean vllm-fleet:parallelism.tensor? (set with `pulumi config set --path parallelism.tensor <value>`)");
    });

    it.each([
        ["imag", "image"],
        ["Nodes", "nodes"],
        ["executer", "executor"],
        ["vllmApiKy", "vllmApiKey"],
        ["sshPrivatekey", "sshPrivateKey"],
        ["maxModelLen", "vllm.maxModelLen"],
        ["subnet", "fabric.subnet"],
        ["hostKey", "nodes[i].hostKey"],
    ])("%s: did you mean %s", (name, target) => {
        expect(nearestKeys(name)).toEqual([target]);
        expect(unknownKeyIssues([name])[0].expected).toContain(`did you mean vllm-fleet:${target}`);
    });

    it("apiKey: names both keys it may mean, the secret and vllm.apiKey", () => {
        expect(nearestKeys("apiKey")).toEqual(["vllm.apiKey", "vllmApiKey"]);
    });

    it("lists the known keys when none is near", () => {
        const [issue] = unknownKeyIssues(["openaiToken"]);
        expect(issue.key).toBe("vllm-fleet:openaiToken");
        expect(issue.expected).toBe(`a key vllm-fleet reads: ${[...CONFIG_KEYS, ...SECRET_CONFIG_KEYS].join(", ")}`);
    });

    it("knows every key the program reads, the secrets included", () => {
        expect(unknownKeyIssues([...CONFIG_KEYS, ...SECRET_CONFIG_KEYS])).toEqual([]);
    });

    it("never quotes the value of an unknown key, which may be a secret set under a wrong name", () => {
        const error = errorOf({ ...duo, openaiToken: "sk-do-not-print", vllmApiKy: "sk-do-not-print" });
        expect(error.issues.map((issue) => issue.key)).toEqual(["vllm-fleet:openaiToken", "vllm-fleet:vllmApiKy"]);
        expect(error.message).not.toContain("do-not-print");
        expect(linesOf(error)[1]).toBe("  - vllm-fleet:vllmApiKy: unknown key; expected a key vllm-fleet reads; did you mean vllm-fleet:vllmApiKey?");
    });

    it("reports an unknown nested key as unknown, not the key it was meant to be as missing", () => {
        const error = errorOf({ ...duo, model: { path: "/models/q", servdName: "q" } });
        expect(linesOf(error)).toEqual(["  - vllm-fleet:model.servdName: unknown key; expected a key of vllm-fleet:model; did you mean vllm-fleet:model.servedName?"]);
        const node = errorOf({ ...duo, nodes: [{ name: "spark1", host: "h1", hostkey: "ssh-ed25519 AAAA" }] });
        expect(linesOf(node)).toEqual(["  - vllm-fleet:nodes[0].hostkey: unknown key; expected a key of vllm-fleet:nodes[0]; did you mean vllm-fleet:nodes[0].hostKey?"]);
        const far = errorOf({ ...duo, ray: { port: 6379, dashboard: true } });
        expect(linesOf(far)).toEqual(["  - vllm-fleet:ray.dashboard: unknown key; expected a key of vllm-fleet:ray: port"]);
    });

    it("says a required key misspelled once, as the unknown key, not again as missing", () => {
        expect(linesOf(errorOf({ ...duo, model: { paht: "/models/q" } }))).toEqual([
            "  - vllm-fleet:model.paht: unknown key; expected a key of vllm-fleet:model; did you mean vllm-fleet:model.path? (it is required and missing)",
        ]);
        expect(linesOf(errorOf({ ...duo, fabric: undefined, fabrik: { subnet: "192.168.200.0/24" } }))).toEqual([
            "  - vllm-fleet:fabrik: unknown key; expected a key vllm-fleet reads; did you mean vllm-fleet:fabric? (it is required and missing)",
        ]);
        // A key missing for no misspelling is still reported missing.
        expect(issuesOf({ ...duo, model: { servedName: "q" } })).toEqual(["vllm-fleet:model.path"]);
    });

    it("leaves the secret keys to the program: present in the raw values, they are ignored here", () => {
        expect(parseFleetConfig({ ...duo, sshPrivateKey: "x", vllmApiKey: "y" }).nodes).toHaveLength(2);
    });

    it("measures the distance case-insensitively, a swap of two letters counting one", () => {
        expect(editDistance("maxModelLen", "maxmodellen")).toBe(0);
        expect(editDistance("exectuor", "executor")).toBe(1);
        expect(editDistance("tensorParalel", "tensorParallel")).toBe(1);
        expect(editDistance("", "abc")).toBe(3);
    });
});

describe("managed flags in vllm.extraArgs, in every spelling vLLM's parser accepts", () => {
    it.each([
        ["--tensor-parallel-size", "--tensor-parallel-size"],
        ["--tensor-parallel-size=4", "--tensor-parallel-size"],
        ["--tensor_parallel_size=4", "--tensor-parallel-size"],
        ["--tensor_parallel_size 4", "--tensor-parallel-size"],
        ["--tensor_parallel_size", "--tensor-parallel-size"],
        ["-tp", "-tp"],
        ["-tp=4", "-tp"],
        ["-tp 4", "-tp"],
        ["-pp", "-pp"],
        // argparse's abbreviations (vLLM keeps allow_abbrev): prefixes of a long flag or an alias.
        ["--tensor-par", "--tensor-parallel-size"],
        ["--tensor_par=4", "--tensor-parallel-size"],
        ["--served-model", "--served-model-name"],
        ["-t", "-tp"],
        ["-t=4", "-tp"],
        // One-letter aliases with the value attached.
        ["-n", "-n"],
        ["-n2", "-n"],
        ["-r1", "-r"],
        ["--node_rank=1", "--node-rank"],
        ["--nnodes", "--nnodes"],
        ["--master-addr=10.0.0.1", "--master-addr"],
        ["--headless", "--headless"],
        ["--host=127.0.0.1", "--host"],
        ["--port", "--port"],
        ["--api-key=sk", "--api-key"],
        ["--api_key", "--api-key"],
        ["--gpu_memory_utilization=0.5", "--gpu-memory-utilization"],
        ["--max-model-len=8k", "--max-model-len"],
        ["--reasoning_parser=qwen3", "--reasoning-parser"],
        ["--tool-call-parser", "--tool-call-parser"],
        ["--distributed_executor_backend=mp", "--distributed-executor-backend"],
        // BooleanOptionalAction's twins.
        ["--no-trust-remote-code", "--no-trust-remote-code"],
        ["--trust_remote_code", "--trust-remote-code"],
        ["--no-enable-auto-tool-choice", "--no-enable-auto-tool-choice"],
        ["--enable-auto-tool", "--enable-auto-tool-choice"],
    ])("%s is %s", (arg, flag) => {
        expect(managedVllmFlag(arg)?.flags).toEqual([flag]);
    });

    it("names every flag an ambiguous abbreviation could be", () => {
        expect(managedVllmFlag("--master")?.flags).toEqual(["--master-addr", "--master-port"]);
    });

    it.each([
        "--enforce-eager",
        "--max-num-seqs=256",
        "--kv-cache-dtype=fp8",
        "--reasoning-parser-plugin=/plugins/p.py",
        "--tool-parser-plugin",
        "--data-parallel-size",
        "-dp",
        "-q",
        "-O3",
        "-O",
        "--port-range",
        "--",
        "-",
        "-1",
        "4",
        "fp8",
    ])("%s is not managed", (arg) => {
        expect(managedVllmFlag(arg)).toBeUndefined();
    });

    it.each([
        [["--tensor_parallel_size=4"], "vLLM reads it as --tensor-parallel-size, which comes from vllm-fleet:parallelism.tensor"],
        [["--tensor-parallel-size=4"], "--tensor-parallel-size comes from vllm-fleet:parallelism.tensor"],
        [["--tensor_parallel_size 4"], "vLLM reads it as --tensor-parallel-size, which comes from vllm-fleet:parallelism.tensor"],
        [["--tensor_parallel_size", "4"], "vLLM reads it as --tensor-parallel-size, which comes from vllm-fleet:parallelism.tensor"],
        [["-tp=4"], "-tp (--tensor-parallel-size) comes from vllm-fleet:parallelism.tensor"],
        [["-t", "4"], "it abbreviates -tp (--tensor-parallel-size), which comes from vllm-fleet:parallelism.tensor (vLLM takes a flag's unambiguous prefix for the flag)"],
        [["--tensor-par=4"], "it abbreviates --tensor-parallel-size, which comes from vllm-fleet:parallelism.tensor (vLLM takes a flag's unambiguous prefix for the flag)"],
        [["-n2"], "vLLM reads it as -n (--nnodes), which is the number of vllm-fleet:nodes with the mp executor"],
        [["--master=10.0.0.1"], "it abbreviates --master-addr or --master-port, all set by vllm-fleet"],
        [["--no-trust-remote-code"], "--no-trust-remote-code comes from vllm-fleet:vllm.trustRemoteCode"],
        [["--api-key", "sk"], "--api-key comes from the secret vllm-fleet:vllmApiKey (as VLLM_API_KEY)"],
        [["--host=127.0.0.1"], "--host comes from vllm-fleet:vllm.host"],
    ])("refuses %j naming the flag and the key it comes from", (extraArgs, words) => {
        const error = errorOf({ ...duo, vllm: { extraArgs: ["--enforce-eager", ...extraArgs] } });
        expect(error.issues.map((issue) => issue.key)).toEqual(["vllm-fleet:vllm.extraArgs[1]"]);
        expect(linesOf(error)[0]).toBe(`  - vllm-fleet:vllm.extraArgs[1]: got ${JSON.stringify(extraArgs[0])}; expected a flag vllm-fleet does not set itself: ${words}`);
    });
});

describe("ports", () => {
    it("refuses a serving port that is a node's SSH port, naming the nodes", () => {
        const error = errorOf({ ...duo, vllm: { port: 22 } });
        expect(linesOf(error)).toEqual([
            "  - vllm-fleet:vllm.port: got 22; expected a port other than the SSH port of spark1, spark2 (the serving containers use the host's network)",
        ]);
        const custom = errorOf({ ...duo, nodes: [{ name: "spark1", host: "h1" }, { name: "spark2", host: "h2", port: 2222 }], ray: { port: 2222 } });
        expect(custom.issues).toMatchObject([{ key: "vllm-fleet:ray.port", value: 2222, expected: expect.stringContaining("the SSH port of spark2") }]);
    });

    it("refuses sshd's 22 even where vllm-fleet reaches the nodes on another port", () => {
        const error = errorOf({ ...duo, ssh: { user: "aurora", port: 2222 }, vllm: { masterPort: 22 } });
        expect(error.issues).toMatchObject([{ key: "vllm-fleet:vllm.masterPort", expected: expect.stringContaining("sshd's port on every node") }]);
    });

    it("keeps vLLM's port, the rendezvous port and Ray's port apart, one line per key", () => {
        expect(issuesOf({ ...duo, vllm: { masterPort: 6379 } })).toEqual(["vllm-fleet:ray.port"]);
        const error = errorOf({ ...duo, vllm: { port: 7000, masterPort: 7000 }, ray: { port: 7000 } });
        expect(linesOf(error)).toEqual([
            "  - vllm-fleet:vllm.masterPort: got 7000; expected a port other than vllm.port (the serving containers use the host's network)",
            "  - vllm-fleet:ray.port: got 7000; expected a port other than vllm.port and vllm.masterPort (the serving containers use the host's network)",
        ]);
    });

    it("keeps vLLM's port and Ray's off the ports Ray takes by default with the ray executor", () => {
        expect(linesOf(errorOf({ ...duo, vllm: { port: 12000 } }))).toEqual([
            "  - vllm-fleet:vllm.port: got 12000; expected a port other than Ray's worker ports (10002-19999) (the serving containers use the host's network)",
        ]);
        expect(errorOf({ ...duo, ray: { port: 10001 } }).issues).toMatchObject([{ key: "vllm-fleet:ray.port", expected: expect.stringContaining("Ray's client server port (10001)") }]);
        expect(errorOf({ ...duo, vllm: { port: 52365 } }).issues).toMatchObject([{ key: "vllm-fleet:vllm.port", expected: expect.stringContaining("Ray's dashboard agent port (52365)") }]);
        // Ray's GCS binds before its workers, which then avoid it; with mp there is no Ray at all.
        expect(parseFleetConfig({ ...duo, ray: { port: 12000 } }).ray.port).toBe(12000);
        expect(parseFleetConfig({ ...duo, executor: "mp", vllm: { port: 12000 } }).vllm.port).toBe(12000);
    });

    it("accepts ports below 1024 and keeps the range 1-65535", () => {
        expect(parseFleetConfig({ ...duo, vllm: { port: 80 } }).vllm.port).toBe(80);
        expect(issuesOf({ ...duo, vllm: { port: 65536 } })).toEqual(["vllm-fleet:vllm.port"]);
        expect(issuesOf({ ...duo, ray: { port: 0 } })).toEqual(["vllm-fleet:ray.port"]);
    });
});

describe("the model path", () => {
    it.each([
        ["/", "a model directory, not the root directory"],
        ["//", "a model directory, not the root directory"],
        ["/home/aurora/../..", "a model directory, not the root directory"],
        ["/etc", "a model directory, not the system directory /etc"],
        ["/usr/", "a model directory, not the system directory /usr"],
        ["/usr/lib", "a model directory, not the system directory /usr/lib"],
        ["/home", "a model directory, not the system directory /home"],
        ["/boot", "a model directory, not the system directory /boot"],
        ["/bin", "a model directory, not the system directory /bin"],
        ["/lib", "a model directory, not the system directory /lib"],
        ["/proc/self", "a model directory, not a path inside /proc (a kernel file system)"],
        ["/sys/class/net", "a model directory, not a path inside /sys (a kernel file system)"],
        ["/dev/shm/model", "a model directory, not a path inside /dev (a kernel file system)"],
    ])("refuses %s", (modelPath, expected) => {
        const error = errorOf({ ...duo, model: { path: modelPath } });
        expect(linesOf(error)).toEqual([`  - vllm-fleet:model.path: got ${JSON.stringify(modelPath)}; expected ${expected} (it is mounted into every serving container)`]);
    });

    it("takes a directory inside a system directory, normalized, named after its last part", () => {
        expect(parseFleetConfig({ ...duo, model: { path: "/usr/local/models/q" } }).model.path).toBe("/usr/local/models/q");
        expect(parseFleetConfig({ ...duo, model: { path: "/home/aurora//models/./q/" } }).model).toEqual({ path: "/home/aurora/models/q", servedName: "q", sync: "none" });
    });
});

describe("messages read as plain English and name the key as the user writes it", () => {
    it.each([
        [{ vllm: { port: 8000.5 } }, "vllm-fleet:vllm.port: got 8000.5; expected an integer"],
        [{ vllm: { maxModelLen: 8 } }, "vllm-fleet:vllm.maxModelLen: got 8; expected at least 16"],
        [{ vllm: { gpuMemoryUtilization: 0 } }, "vllm-fleet:vllm.gpuMemoryUtilization: got 0; expected a fraction in (0, 1], e.g. 0.9"],
        [{ vllm: { extraArgs: ["--enforce-eager", "--max-num-seqs", 256] } }, "vllm-fleet:vllm.extraArgs[2]: got 256; expected a string"],
        [{ vllm: { extraArgs: "--enforce-eager" } }, 'vllm-fleet:vllm.extraArgs: got "--enforce-eager"; expected a list'],
        [{ vllm: { trustRemoteCode: "yes" } }, 'vllm-fleet:vllm.trustRemoteCode: got "yes"; expected true or false'],
        [{ vllm: 8000 }, "vllm-fleet:vllm: got 8000; expected an object"],
        [{ model: { path: "/models/q", servedName: "" } }, 'vllm-fleet:model.servedName: got ""; expected at least 1 character'],
        [{ nodes: [] }, "vllm-fleet:nodes: got []; expected at least one node"],
        [{ nodes: [{ name: "spark1" }] }, "vllm-fleet:nodes[0].host: missing; expected a string"],
        [{ timeouts: { sshConnectSeconds: 601 } }, "vllm-fleet:timeouts.sshConnectSeconds: got 601; expected at most 600"],
        [{ executor: "slurm" }, 'vllm-fleet:executor: got "slurm"; expected one of "ray", "mp"'],
        [{ fabric: { subnet: "192.168.200.0/24", socketTransport: "ignore" } }, 'vllm-fleet:fabric.socketTransport: got "ignore"; expected one of "auto", "refuse", "warn"'],
        [{ container: { privileged: "true" } }, 'vllm-fleet:container.privileged: got "true"; expected true or false'],
    ])("%j", (patch, line) => {
        const lines = linesOf(errorOf({ ...duo, ...patch }));
        expect(lines).toEqual([`  - ${line}`]);
    });

    it("never shows zod's own wording", () => {
        const error = errorOf({ nodes: [{ name: "A", host: "h", port: 0.5 }], ssh: { port: "22" }, fabric: {}, image: { name: "" }, model: { path: 1 }, vllm: { port: -1, extraArgs: [1] }, timeouts: { vllmReadySeconds: 1 } });
        expect(error.message).not.toMatch(/Invalid input|Too small|Too big|Unrecognized|expected a int|expected a array|expected a object/);
        expect(error.message).toContain("vllm-fleet:nodes[0].port: got 0.5; expected an integer");
    });

    it("merges the problems of one key into one line", () => {
        const error = new ConfigError([
            { key: "vllm-fleet:a", value: 1, expected: "x" },
            { key: "vllm-fleet:b", value: 2, expected: "y" },
            { key: "vllm-fleet:a", value: 1, expected: "z" },
            { key: "vllm-fleet:a", value: 1, expected: "x" },
        ]);
        expect(error.message.split("\n")).toEqual([
            "invalid stack configuration (2 problems); nothing was run on any host:",
            "  - vllm-fleet:a: got 1; expected x; and z",
            "  - vllm-fleet:b: got 2; expected y",
        ]);
    });
});

describe("new settings and their defaults", () => {
    it("runs the serving containers unprivileged and lets NCCL's transport decide per node by default", () => {
        const config = parseFleetConfig(duo);
        expect(config.container.privileged).toBe(false);
        expect(config.fabric.socketTransport).toBe("auto");
        const custom = parseFleetConfig({ ...duo, fabric: { subnet: "192.168.200.0/24", socketTransport: "warn" }, container: { privileged: true } });
        expect(custom.fabric.socketTransport).toBe("warn");
        expect(custom.container).toEqual({ shmSizeBytes: Math.round(10.24 * 1024 ** 3), memlockBytes: -1, stackBytes: 67108864, privileged: true });
    });
});

/** An openssh-key-v1 body with this cipher (what ssh-keygen writes, up to the cipher name). */
function opensshKey(cipher: string): string {
    const name = Buffer.from(cipher, "latin1");
    const length = Buffer.alloc(4);
    length.writeUInt32BE(name.length);
    const body = Buffer.concat([Buffer.from("openssh-key-v1\0", "latin1"), length, name, Buffer.alloc(48, 7)]).toString("base64");
    return `-----BEGIN OPENSSH PRIVATE KEY-----\n${body.replace(/(.{70})/g, "$1\n")}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

describe("the SSH private key", () => {
    it.each([
        ["an OpenSSH key", opensshKey("none")],
        ["an RSA PEM key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"],
        ["an EC PEM key with CRLF", "-----BEGIN EC PRIVATE KEY-----\r\nMHcCAQEE\r\n-----END EC PRIVATE KEY-----\r\n"],
        ["a PKCS#8 key", "-----BEGIN PRIVATE KEY-----\nMC4CAQAw\n-----END PRIVATE KEY-----"],
        ["a body that is not openssh-key-v1 (left to ssh)", "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----"],
    ])("takes %s", (_label, text) => {
        expect(privateKeyProblem(text)).toBeUndefined();
    });

    it.each([
        ["a public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY user@host\n", /this is a public key/],
        ["a PuTTY key", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n", /PuTTY key: convert it with `puttygen/],
        ["a key cut short", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", /no matching END line/],
        ["a path given as the secret", "/home/aurora/.ssh/id_ed25519", /this text holds none/],
        ["an empty secret", "", /this text holds none/],
        ["an OpenSSH key with a passphrase", opensshKey("aes256-ctr"), /without a passphrase.*ssh-keygen -p/],
        ["an encrypted PEM key", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIE\n-----END RSA PRIVATE KEY-----\n", /without a passphrase/],
        ["an encrypted PKCS#8 key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n", /without a passphrase/],
    ])("refuses %s", (_label, text, problem) => {
        expect(privateKeyProblem(text)).toMatch(problem);
    });

    it("never quotes the key in the message", () => {
        const secret = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDoNotPrintThis user@host";
        const error = new ConfigError(sshPrivateKeyIssues(secret));
        expect(error.message).toBe(
            `invalid stack configuration (1 problem); nothing was run on any host:\n  - vllm-fleet:sshPrivateKey: got a secret of ${secret.length} characters; expected a private key, and this is a public key (the .pub file): give the file without .pub`,
        );
        expect(sshPrivateKeyIssues(opensshKey("none"))).toEqual([]);
        expect(sshPrivateKeyIssues(undefined)).toEqual([]);
    });
});

describe("the API key", () => {
    it.each([
        ["abc\n", "got a key ending in a newline"],
        [" abc", "got a key beginning or ending in whitespace"],
        ["abc\r\ndef", "got a key with a line break inside"],
        ["abc def", "got a key with whitespace inside"],
        ["abc\u0007def", "got a key with a control character"],
        ["clé", "got a key with characters outside printable ASCII"],
    ])("refuses %j: one token, as a header carries it", (value, found) => {
        const issues = apiKeyIssues(value);
        expect(issues).toMatchObject([{ key: "vllm-fleet:vllmApiKey", found, expected: expect.stringContaining("one token of printable ASCII without spaces") }]);
        expect(new ConfigError(issues).message).not.toContain(value.trim());
    });

    it("refuses an empty key, saying how to serve without one", () => {
        expect(apiKeyIssues("")).toMatchObject([{ found: "got an empty key", expected: "a key (without it the stack makes one; to serve without any: pulumi config rm vllmApiKey, and set vllm-fleet:vllm.apiKey to none)" }]);
    });

    it("takes a key of printable ASCII, and no key", () => {
        expect(apiKeyIssues("sk-0123456789abcdef_XYZ.~+/=")).toEqual([]);
        expect(apiKeyIssues(undefined)).toEqual([]);
    });

    it("refuses a key set in plain text, telling how to set it as a secret, without quoting it", () => {
        const error = new ConfigError(plainTextSecretIssues("vllmApiKey", "sk-plain-value", false));
        expect(linesOf(error)).toEqual([
            '  - vllm-fleet:vllmApiKey: a value in plain text in the stack settings; expected a secret: run `pulumi config set --secret vllmApiKey "$(openssl rand -hex 16)"` (and replace the old value, which the stack file holds in plain text)',
        ]);
        expect(plainTextSecretIssues("vllmApiKey", "sk", true)).toEqual([]);
        expect(plainTextSecretIssues("vllmApiKey", undefined, false)).toEqual([]);
        expect(plainTextSecretIssues("sshPrivateKey", "k", false)[0].expected).toContain("pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519");
    });
});

describe("CIDR helpers", () => {
    it.each([
        ["192.168.200.0/24", "192.168.200.12", true],
        ["192.168.200.0/24", "192.168.201.12", false],
        ["10.0.0.0/8", "10.255.1.1", true],
        ["0.0.0.0/0", "8.8.8.8", true],
        ["192.168.200.12/32", "192.168.200.12", true],
        ["192.168.200.0/24", "not-an-ip", false],
    ])("%s contains %s: %s", (cidr, ip, inside) => {
        const block = parseCidr(cidr);
        expect(block).toBeDefined();
        expect(cidrContains(block!, ip)).toBe(inside);
    });

    it.each(["192.168.200.1/24", "300.1.1.0/24", "10.0.0.0/33", "10.0.0.0", "fe80::/64"])("rejects %s", (cidr) => {
        expect(parseCidr(cidr)).toBeUndefined();
    });
});

describe("security settings", () => {
    it("takes vllm.apiKey none only, never quoting another value there (it may be a key)", () => {
        const error = errorOf({ ...duo, vllm: { apiKey: "sk-do-not-print" } });
        expect(error.message).toContain("vllm-fleet:vllm.apiKey: a value other than none (not shown: it may be a key); expected none, to serve without a key");
        expect(error.message).not.toContain("sk-do-not-print");
        expect(parseFleetConfig({ ...duo, vllm: { apiKey: "none" } }).vllm.apiKey).toBe("none");
        expect(parseFleetConfig(duo).vllm.apiKey).toBeUndefined();
    });

    it("takes vllm.host all or fabric, all by default", () => {
        expect(parseFleetConfig(duo).vllm.host).toBe("all");
        expect(parseFleetConfig({ ...duo, vllm: { host: "fabric" } }).vllm.host).toBe("fabric");
        expect(errorOf({ ...duo, vllm: { host: "10.0.0.1" } }).message).toContain('vllm-fleet:vllm.host: got "10.0.0.1"; expected one of "all", "fabric"');
    });

    it("defaults security to no firewall and the first Ray token, and names a misspelled key", () => {
        expect(parseFleetConfig(duo).security).toEqual({ rayTokenRotation: "", firewall: false, clients: ["0.0.0.0/0"], servicePorts: "clients", allowedOrigins: [] });
        expect(errorOf({ ...duo, security: { firewal: true } }).message).toContain("did you mean vllm-fleet:security.firewall?");
        expect(errorOf({ ...duo, security: { rayTokenRotation: 3 } }).message).toContain("vllm-fleet:security.rayTokenRotation: got 3; expected a string");
    });
});
