// crane, go-containerregistry's registry tool, as the tests use it (docs/contributing/test-beds.md#tests): `crane registry serve` is
// the OCI registry the forwarder image's index is written to and read back from, and the other commands make
// and inspect the images in it.
package main

import (
	"os"

	"github.com/google/go-containerregistry/cmd/crane/cmd"
)

func main() {
	if err := cmd.New("crane", "crane", nil).Execute(); err != nil {
		os.Exit(1)
	}
}
