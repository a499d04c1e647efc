//go:build farwing_peers

package peers

import (
	"embed"
	"path"
)

// carried is placed by the build's -overlay (scripts/peers.sh); a build with the tag but without
// it fails to compile, which is the point: a release build carries its peers.
//
//go:embed carried
var carried embed.FS

func load() ([]Peer, error) {
	m, err := carried.ReadFile(path.Join("carried", Manifest))
	if err != nil {
		return nil, err
	}
	return Parse(m, func(name string) ([]byte, error) { return carried.ReadFile(path.Join("carried", name)) })
}
