/**
 * The memory budgets of the services, planned once at the start of a run from what the read of the
 * nodes found (fit/budget.ts): each service's `--gpu-memory-utilization` when several share a node.
 * A service whose model's config.json is not on its first node yet (a download to come) gets an
 * equal share; the fit after preparation (fleet.ts checkPrepared) checks it with the real figures.
 * Pure.
 */
import { FleetConfig, ServiceConfig } from "../config";
import { NodeFacts } from "../facts";
import { BudgetPlan, BudgetService, describeBudgets, fitNodeFromFacts, kvCacheDtypeFromArgs, parseModelConfig, planBudgets, safetensorsWeightBytes, sharesNodes } from "../fit";

/** The budgets, or none when no node holds two services (each keeps its own or the default utilization). */
export interface ServiceBudgets {
    /** The utilization of each service, by name (only with budgets). */
    readonly utilization: Readonly<Record<string, number>>;
    /** The table to show (pulumi.log.info), when nodes are shared. */
    readonly description?: string;
}

/** The least-need request of `service` from its first node's facts, when its config.json is known there. */
function budgetService(service: ServiceConfig, facts: (node: string) => NodeFacts): BudgetService {
    const head = facts(service.nodes[0].name);
    const request = head.model.configJson
        ? {
              model: parseModelConfig(head.model.configJson, `${service.model.path}/config.json on ${service.nodes[0].name}`),
              modelName: service.model.servedName,
              weightBytes: safetensorsWeightBytes(head.model),
              tensorParallel: service.parallelism.tensor,
              pipelineParallel: service.parallelism.pipeline,
              nodes: service.nodes.map((node) => fitNodeFromFacts(node.name, facts(node.name))),
              maxModelLen: service.vllm.maxModelLen,
              kvCacheDtype: kvCacheDtypeFromArgs(service.vllm.extraArgs),
          }
        : undefined;
    return { name: service.name, nodes: service.nodes.map((node) => node.name), utilization: service.vllm.gpuMemoryUtilization, request };
}

/**
 * Each service's utilization when services share a node, or throws FitError with the numbers per
 * node and per service; empty when every node holds at most one service.
 */
export function planServiceBudgets(config: Pick<FleetConfig, "nodes" | "services">, facts: (node: string) => NodeFacts): ServiceBudgets {
    const shared = config.nodes.some((node) => config.services.filter((service) => service.nodes.some((own) => own.name === node.name)).length > 1);
    if (!shared) {
        return { utilization: {} };
    }
    const plan: BudgetPlan = planBudgets(
        config.services.map((service) => budgetService(service, facts)),
        config.nodes.map((node) => fitNodeFromFacts(node.name, facts(node.name))),
    );
    return { utilization: plan.utilization, description: sharesNodes(plan) ? describeBudgets(plan) : undefined };
}
