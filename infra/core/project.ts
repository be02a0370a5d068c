import * as fs from "fs";
import * as path from "path";

/** The project root: the nearest directory at or above `start` holding Pulumi.yaml (also from bin/). */
export function findProjectRoot(start: string = __dirname): string {
    for (let dir = start; ; dir = path.dirname(dir)) {
        if (fs.existsSync(path.join(dir, "Pulumi.yaml"))) {
            return dir;
        }
        if (path.dirname(dir) === dir) {
            throw new Error(`no Pulumi.yaml above ${start}`);
        }
    }
}
