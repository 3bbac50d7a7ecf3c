//go:build etcd_legacy_urls

package main

import (
	"net/url"

	"go.etcd.io/etcd/server/v3/embed"
)

// setEtcdURLs for etcd v3.5.x releases whose embed.Config still names the URL fields
// LCUrls/ACUrls/LPUrls/APUrls (e.g. v3.5.7, Kubernetes v1.27's). Only scripts/hub.sh's
// MWRS_HUB_K8S builds use it; see etcd_urls.go.
func setEtcdURLs(cfg *embed.Config, client, peer url.URL) {
	cfg.LCUrls = []url.URL{client}
	cfg.ACUrls = []url.URL{client}
	cfg.LPUrls = []url.URL{peer}
	cfg.APUrls = []url.URL{peer}
}
