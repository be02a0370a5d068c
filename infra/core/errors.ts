/**
 * Errors meant for the person running `pulumi preview`/`up`: the message is the whole story (the
 * key or the node, the fact, what was expected), so no stack trace and no wrapping.
 *
 * Pulumi's Node.js runtime prints an uncaught `RunError` as its message alone. Pulumi marks a
 * RunError with `__pulumiRunError` (RunError.isInstance checks that marker), so a FleetError is
 * one without this pure module importing the SDK. When such an error is thrown inside an `apply`
 * whose value feeds a resource, the SDK prefixes `error serializing property "<name>": ` to its
 * message once per level of nesting (nine levels for a container spec); the message here ignores
 * those writes, so the user reads one clean line per problem.
 */
export class FleetError extends Error {
    /** Pulumi's RunError marker: printed as the message alone, without a stack trace. */
    readonly __pulumiRunError = true;

    constructor(message: string) {
        super(message);
        this.name = new.target.name;
        Object.defineProperty(this, "message", {
            get: () => message,
            // Writes (the SDK's prefixes) are ignored; a throwing setter would replace this error.
            set: () => undefined,
            enumerable: false,
            configurable: true,
        });
    }
}

/** A finding about the nodes (their facts, compared with one another) that stops the deployment. */
export class PreflightError extends FleetError {}
