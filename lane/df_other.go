//go:build !linux

package lane

import "errors"

// SetDontFragment is not supported off Linux: a client there does not propose large datagrams
// off loopback (a datagram its host fragmented would prove nothing in the handshake).
func (c *Conn) SetDontFragment(on bool) error {
	if on {
		return errors.ErrUnsupported
	}
	return nil
}
