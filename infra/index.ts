// Entry point for the Pulumi CLI (Pulumi.yaml `main`). The program itself is in ./program.ts.
// Exported as a function, which the Node.js runtime calls and awaits at once: a promise started at
// load time and failing (a refused config) would be reported as unhandled first and handled later,
// which Node prints as a PromiseRejectionHandledWarning under the error.
import { fleetProgram } from "./program";

export = () => fleetProgram();
