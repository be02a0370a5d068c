/** The ConfigError a raw stack config fails with, for the tests of its messages. */
import { expect } from "vitest";
import { ConfigError, parseFleetConfig } from "../../infra/core/config";

/** The ConfigError `parse` throws (by default: parsing `raw`); a test fails when it throws none. */
export function configErrorOf(raw: Record<string, unknown>, parse: (raw: Record<string, unknown>) => unknown = parseFleetConfig): ConfigError {
    try {
        parse(raw);
    } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return error as ConfigError;
    }
    throw new Error("expected a ConfigError");
}

/** The problem lines of the ConfigError `raw` fails with (its first line is the heading). */
export function configProblems(raw: Record<string, unknown>): string[] {
    return configErrorOf(raw).message.split("\n").slice(1);
}
