// Entry point for the Pulumi CLI (Pulumi.yaml `main`). The program itself is in ./program.ts.
import { fleetProgram } from "./program";

export = fleetProgram();
