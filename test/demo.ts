/**
 * The demo (npm run demo): deploys the `sim` stack (stacks/Pulumi.sim.yaml) to the simulated Sparks
 * through the Automation API, so that it runs where no Pulumi language host is installed, then
 * asks the endpoint for a completion from this machine.
 */
import * as fs from "fs";
import * as path from "path";
import { openStack, REPO_ROOT } from "./automation";
import { stackStatus } from "../tools/status";
import { SimCluster, putTinyModel } from "./e2e/simCluster";

const MODEL_DIR = "/home/spark/models/tiny-moe";

function readCluster(): SimCluster {
    return JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "test/sim/.state/sim/cluster.json"), "utf8")) as SimCluster;
}

async function up(): Promise<void> {
    const cluster = readCluster();
    const stack = await openStack("sim");
    const config = await stack.getAllConfig();
    const nodes = JSON.parse(config["vllm-fleet:nodes"].value) as { host: string }[];
    const hosts = cluster.nodes.map((node) => node.sshHost);
    if (JSON.stringify(nodes.map((node) => node.host)) !== JSON.stringify(hosts)) {
        throw new Error(`the simulated cluster's hosts (${hosts.join(", ")}) are not those of stacks/Pulumi.sim.yaml; is another cluster on its subnets?`);
    }
    // What a model download would have left on every node (weight distribution is not part of the demo).
    putTinyModel(cluster, MODEL_DIR);

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
    console.log(`transport:  ${JSON.stringify(result.outputs.fabricTransport?.value ?? {})} (NCCL over the fabric: IB is RoCE, Socket is TCP)`);
    console.log(`completion: ${body.choices[0].text}`);
    // What `npm run status -- --stack sim` prints (read-only).
    const status = await stackStatus(stack.workspace, "sim");
    console.log(`status:\n${status.text.replace(/^/gm, "  ")}`);
    console.log("try it:     source test/toolchain/env.sh; KEY=$(pulumi stack output apiKey --show-secrets --stack sim)");
    console.log(`            curl -s ${endpoint}/completions -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"model":"${model}","prompt":"hi","max_tokens":8}'`);
    console.log("tear down:  npm run demo -- down");
}

async function down(): Promise<void> {
    const stack = await openStack("sim");
    await stack.destroy({ onOutput: (text) => process.stdout.write(text) });
}

const action = process.argv[2] ?? "up";
(action === "down" ? down() : up()).catch((error: Error) => {
    console.error(error.message);
    process.exit(1);
});
