/**
 * The demo (npm run demo): deploys the `sim` stack (stacks/Pulumi.sim.yaml) to the simulated Sparks
 * through the Automation API, so that it runs where no Pulumi language host is installed, then
 * asks the endpoint for a completion from this machine. With `--real` it deploys the `sim-real`
 * stack (stacks/Pulumi.sim-real.yaml): real vLLM (its CPU build) and a tiny random-weight model
 * the image carries, instead of the vLLM stand-in. `down` destroys whichever the last `up` deployed.
 */
import * as fs from "fs";
import * as path from "path";
import { openStack, REPO_ROOT } from "./automation";
import { stackStatus } from "../tools/status";
import { SimCluster, putImageModel, putTinyModel } from "./e2e/simCluster";

/** Which stack the last `up` deployed (`down` destroys that one). */
const DEPLOYED = path.join(REPO_ROOT, "test/sim/.state/sim/demo-stack");

function readCluster(): SimCluster {
    return JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "test/sim/.state/sim/cluster.json"), "utf8")) as SimCluster;
}

async function up(real: boolean): Promise<void> {
    const cluster = readCluster();
    const stackName = real ? "sim-real" : "sim";
    const stack = await openStack(stackName);
    const config = await stack.getAllConfig();
    const nodes = JSON.parse(config["vllm-fleet:nodes"].value) as { host: string }[];
    const hosts = cluster.nodes.map((node) => node.sshHost);
    if (JSON.stringify(nodes.map((node) => node.host)) !== JSON.stringify(hosts)) {
        throw new Error(`the simulated cluster's hosts (${hosts.join(", ")}) are not those of stacks/Pulumi.${stackName}.yaml; is another cluster on its subnets?`);
    }
    // What a model download would have left on every node (weight distribution is not part of the
    // demo): the stand-in's tiny model directory, or the real image's tiny random-weight Llama.
    const modelDir = (JSON.parse(config["vllm-fleet:model"].value) as { path: string }).path;
    if (real) {
        putImageModel(cluster, path.posix.basename(modelDir), modelDir);
    } else {
        putTinyModel(cluster, modelDir);
    }
    fs.writeFileSync(DEPLOYED, stackName);

    const result = await stack.up({ onOutput: (text) => process.stdout.write(text) });
    const endpoint = result.outputs.endpoint.value as string;
    const model = result.outputs.model.value as string;
    // The key the stack made (a secret output): the API refuses a request without it.
    const apiKey = (result.outputs.apiKey?.value as string | undefined) ?? "";
    const response = await fetch(`${endpoint}/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model, prompt: "Which nodes answered?", max_tokens: 16 }),
    });
    const body = (await response.json()) as { choices: { text: string }[] };
    console.log("\n== vllm-fleet demo");
    console.log(`endpoint:   ${endpoint}`);
    console.log(`model:      ${model}`);
    console.log(`fabric IPs: ${JSON.stringify(result.outputs.fabricIps.value)}`);
    console.log(
        real
            ? "transport:  gloo over the fabric (vLLM's CPU build has no NCCL; its ranks are pinned to the fabric interface)"
            : `transport:  ${JSON.stringify(result.outputs.fabricTransport?.value ?? {})} (NCCL over the fabric: IB is RoCE, Socket is TCP)`,
    );
    // Real vLLM's model has random weights: its text is noise, but real vLLM made it on both ranks.
    console.log(`completion: ${real ? `${JSON.stringify(body.choices[0].text)} (real vLLM 0.32, CPU build; random weights, so the text is noise)` : body.choices[0].text}`);
    // What `npm run status -- --stack sim` prints (read-only).
    const status = await stackStatus(stack.workspace, stackName);
    console.log(`status:\n${status.text.replace(/^/gm, "  ")}`);
    console.log(`try it:     source test/toolchain/env.sh; KEY=$(pulumi stack output apiKey --show-secrets --stack ${stackName})`);
    console.log(`            curl -s ${endpoint}/completions -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"model":"${model}","prompt":"hi","max_tokens":8}'`);
    console.log("tear down:  npm run demo -- down");
}

async function down(): Promise<void> {
    const stack = await openStack(fs.existsSync(DEPLOYED) ? fs.readFileSync(DEPLOYED, "utf8").trim() : "sim");
    await stack.destroy({ onOutput: (text) => process.stdout.write(text) });
    fs.rmSync(DEPLOYED, { force: true });
}

const action = process.argv[2] ?? "up";
(action === "down" ? down() : up(process.argv.includes("--real"))).catch((error: Error) => {
    console.error(error.message);
    process.exit(1);
});
