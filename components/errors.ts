/**
 * The error a component throws: Pulumi's ResourceError, shown with the resource it belongs to and
 * without a stack trace, its message protected as infra/core/errors.ts's FleetError protects its own
 * (thrown inside an `apply`, the SDK prefixes `error serializing property ...` once per level of
 * nesting; those writes are ignored, so the user reads one clean line).
 */
import * as pulumi from "@pulumi/pulumi";

export class ComponentError extends pulumi.ResourceError {
    constructor(message: string, resource: pulumi.Resource) {
        super(message, resource, /* hideStack */ true);
        this.name = "ComponentError";
        Object.defineProperty(this, "message", {
            get: () => message,
            set: () => undefined,
            enumerable: false,
            configurable: true,
        });
    }
}
