/** The fit planner: will the model fit in the nodes' memory, split TP×PP (plan.ts; the model as it sees it: model.ts); the memory budgets of services sharing nodes (budget.ts). */
export * from "./model";
export * from "./plan";
export * from "./budget";
