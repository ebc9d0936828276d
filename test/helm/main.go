// Command helm is Helm 4's own command line, built from its Go module (helm.sh/helm/v4, through the Go module
// proxy) so the tests render and check deploy/forwarder/chart with a pinned Helm and nothing installed by hand.
//
// It is a module of its own rather than a subcommand of test/cluster: Helm 4.3 needs the Kubernetes 1.37 client
// libraries (k8s.io/apimachinery, client-go, controller-runtime 0.25), and test/cluster pins every k8s.io module
// to the 1.35.4 release its apiserver is built from (docs/contributing/test-beds.md#test-bed).
package main

import (
	"errors"
	"fmt"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// As upstream's cmd/helm: the field manager stays "helm" whatever the binary is called.
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
