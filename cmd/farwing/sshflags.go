package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bootstrap"
	"github.com/farwing/farwing/internal/tuning"
)

// sshFlags are the ssh flags every command that reaches a host takes (copy, bench, doctor), defined
// once.
type sshFlags struct {
	config, identity, jump string
	port                   int
	options                []string
	persist                time.Duration
	bbr                    bool
}

func (f *sshFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.config, "ssh-config", "F", "", "ssh configuration file")
	fs.StringVarP(&f.identity, "identity", "i", "", "ssh identity (private key) file")
	fs.IntVarP(&f.port, "ssh-port", "P", 0, "ssh port (as scp's -P)")
	fs.StringArrayVarP(&f.options, "option", "o", nil, "ssh option, as in ssh -o (repeatable)")
	fs.StringVarP(&f.jump, "jump", "J", "", "ssh jump host (ProxyJump)")
	fs.BoolVar(&f.bbr, "ssh-bbr", true, "where the kernel's default TCP congestion control is not bbr (CUBIC: slow under loss) and your ssh config connects directly, carry ssh's connection over farwing's own ProxyCommand, which asks for bbr; -v says what it did")
	fs.DurationVar(&f.persist, "ssh-persist", 60*time.Second, "keep a shared ssh connection (ControlMaster) open this long after the command, so the next one to the host skips the ssh handshake; 0: off. Unused where your ssh config sets ControlMaster or ControlPath")
}

// ssh returns the bootstrap settings; tun.SSH (FARWING_SSH) names another ssh program (tests),
// tun.Debug (FARWING_DEBUG) turns verbose on.
func (f *sshFlags) ssh(verbose bool, tun tuning.Settings) bootstrap.SSH {
	s := bootstrap.SSH{Config: f.config, Identity: f.identity, Port: f.port, Options: f.options, Jump: f.jump,
		Persist: f.persist, BBR: f.bbr, Verbose: verbose || tun.Debug}
	if tun.SSH != "" {
		s.SSHPath = tun.SSH
	}
	return s
}
