/**
 * The secret of one copy between two nodes over the fabric (the weights' rsync daemon and bulk
 * receiver, the image receiver): derived from the SSH key and what is copied, not random, so the
 * same on every run (no spurious diff) and unknowable without the key. A purpose naming what is
 * copied (the image id) makes a secret per copy.
 */
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";

export function fabricSecret(privateKey: pulumi.Input<string>, purpose: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.secret(
        pulumi.all([privateKey, purpose]).apply(([key, what]) => crypto.createHash("sha256").update(`vllm-fleet ${what}\n${key}`).digest("hex").slice(0, 32)),
    );
}
