//go:build tools

// Package tools pins the Pulumi CLI that the bootstrap (../pulumi.sh) builds from the Go module
// proxy on machines that cannot download Pulumi's release binaries.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
)
