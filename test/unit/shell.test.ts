import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { describe, expect, it } from "vitest";
import { bashCommand, renderAssignments, shQuote } from "../../components/shell";

const hostile = [
    "x'; touch /tmp/pwned; '",
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    'a"b\\c',
    "new\nline",
    "  spaces  ",
    "",
    "ünïcödé ✓",
    "--flag=value with 'quotes'",
];

/** Runs `command` the way sshd does: the login shell gets it as one `-c` string. */
function viaLoginShell(command: string, cwd: string): string {
    return execFileSync("sh", ["-c", command], { encoding: "utf8", cwd });
}

describe("shQuote", () => {
    it.each(hostile)("reads back %j exactly, running nothing", (value) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "shq-"));
        try {
            const program = `${renderAssignments({ VALUE: value })}\nprintf '%s' "$VALUE" > out`;
            viaLoginShell(bashCommand(program), dir);
            expect(fs.readFileSync(path.join(dir, "out"), "utf8")).toBe(value);
            expect(fs.readdirSync(dir)).toEqual(["out"]);
            expect(fs.existsSync("/tmp/pwned")).toBe(false);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("refuses a NUL byte rather than truncating", () => {
        expect(() => shQuote("a\0b")).toThrow(/NUL/);
    });
});

describe("renderAssignments", () => {
    it("renders sorted assignments and bash arrays", () => {
        expect(renderAssignments({ B: 2, A: "x y", ARGS: ["--a", "b c"], FLAG: true })).toBe(
            ["A='x y'", "ARGS=('--a' 'b c')", "B='2'", "FLAG='true'"].join("\n"),
        );
    });

    it("keeps array elements intact through bash", () => {
        const program = `${renderAssignments({ ARGS: hostile })}\nprintf '%s\\0' "\${ARGS[@]}"`;
        const out = execFileSync("sh", ["-c", bashCommand(program)], { encoding: "utf8" });
        expect(out.split("\0").slice(0, -1)).toEqual(hostile);
    });

    it("refuses names that are not shell variables", () => {
        expect(() => renderAssignments({ "A;B": "x" })).toThrow(/not a shell variable name/);
        expect(() => renderAssignments({ lower: "x" })).toThrow(/not a shell variable name/);
    });
});
