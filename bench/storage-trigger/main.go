// kube-storage-version-migrator's trigger for bench/peer (docs/measurements.md#side-by-side-with-kube-storage-version-migrators-trigger):
// its own controller (pkg/trigger) started as its cmd/trigger starts it, against a kubeconfig, with its user
// agent. Two differences, both flags of a program of our own rather than a change to its code: the client's
// rate limit can be set (as shipped it is client-go's default, 5 requests/s, which paces a pass over 1,000
// resources at about 10 minutes; its cmd/trigger sets none), and no health port is opened (it is fixed at :2113
// there):
// https://github.com/kubernetes-sigs/kube-storage-version-migrator/blob/v0.0.5/cmd/trigger/app/trigger.go
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	migrationclient "sigs.k8s.io/kube-storage-version-migrator/pkg/clients/clientset"
	"sigs.k8s.io/kube-storage-version-migrator/pkg/trigger"
	"sigs.k8s.io/kube-storage-version-migrator/pkg/version"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig of the cluster to act on")
	qps := flag.Float64("kube-api-qps", 0, "client requests per second: 0 is client-go's default (as shipped), negative is no limit")
	burst := flag.Int("kube-api-burst", 0, "client burst: 0 is client-go's default")
	klog.InitFlags(nil)
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	config.QPS = float32(*qps)
	config.Burst = *burst
	config.UserAgent = "storage-version-migration-trigger/" + version.VERSION
	client, err := migrationclient.NewForConfig(config)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	trigger.NewMigrationTrigger(client).Run(ctx)
}
