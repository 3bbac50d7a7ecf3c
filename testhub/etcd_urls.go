//go:build !etcd_legacy_urls

package main

import (
	"net/url"

	"go.etcd.io/etcd/server/v3/embed"
)

// setEtcdURLs sets the client and peer URLs (listen = advertise) of an embedded etcd.
// etcd v3.5.x before the fields' renaming calls them LCUrls/ACUrls/LPUrls/APUrls:
// scripts/hub.sh builds its MWRS_HUB_K8S copy with -tags etcd_legacy_urls for such
// an etcd (etcd_urls_legacy.go).
func setEtcdURLs(cfg *embed.Config, client, peer url.URL) {
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
}
