package osworld

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
)

// ErrPartial marks a getter input the guest answered only in part: an
// accessibility tree cut at desktopd's deadline (--a11y-timeout; the root
// says truncated="true") or a directory listing cut at its limits (the
// root says "truncated": true). Scored, the missing part would read as
// absent and give a silent 0 for the agent's work, so the getter fails
// and the episode with it, as an environment error naming the input.
var ErrPartial = errors.New("the guest answered only part of it")

// accessibilityReader is the guest's /accessibility; *guest.Client has it.
type accessibilityReader interface {
	Accessibility(ctx context.Context) (string, error)
}

// accessibilityTree reads the guest's accessibility tree and refuses a
// truncated one. The error of the request itself is returned as is, so
// callers still tell a guest that refuses from one that is gone.
func accessibilityTree(ctx context.Context, g accessibilityReader) (string, error) {
	tree, err := g.Accessibility(ctx)
	if err != nil {
		return "", err
	}
	if treeTruncated(tree) {
		return "", fmt.Errorf("accessibility tree: %w (the root is marked truncated: an application did not answer before the walk's deadline, desktopd's --a11y-timeout)", ErrPartial)
	}
	return tree, nil
}

// treeTruncated says whether the root element of an accessibility tree
// carries truncated="true", as desktopd marks a walk cut short. Only the
// root is read: the mark is an attribute of <desktop-frame>, and the rest
// of a large tree need not be parsed for it.
func treeTruncated(tree string) bool {
	dec := xml.NewDecoder(strings.NewReader(tree))
	dec.Strict = false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Space == "" && a.Name.Local == "truncated" {
					return a.Value == "true"
				}
			}
			return false
		}
	}
}

// listingTruncated refuses a /list_directory answer that desktopd cut at
// its limits of entries or depth.
func listingTruncated(path string, tree map[string]any) error {
	if t, _ := tree["truncated"].(bool); t {
		return fmt.Errorf("listing of %s: %w: the directory holds more entries or levels than the guest lists (the root is marked truncated)", path, ErrPartial)
	}
	return nil
}
