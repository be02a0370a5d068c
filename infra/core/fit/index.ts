/** The fit planner: will the model fit in the nodes' memory, split TP×PP (plan.ts; the model as it sees it: model.ts). */
export * from "./model";
export * from "./plan";
