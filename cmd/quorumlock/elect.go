package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// againPause is how long elect --again waits between a term's end and the
// next campaign: a COMMAND that fails at once does not make a busy loop
// of campaigns.
const againPause = time.Second

// electCommand is `quorumlock elect`: it campaigns for KEY (for ever, or
// up to --wait), runs COMMAND while it leads as run runs it under a lock,
// and resigns when COMMAND's group is gone. With --again it stands again
// after each term, until a signal.
func electCommand(args []string, stdout, stderr io.Writer) int {
	s, pos, command, err := parse("elect", args)
	if code, done := parsed(err, "elect", stdout, stderr); done {
		return code
	}
	switch {
	case len(pos) == 0 || len(command) == 0:
		return usageFailure(stderr, "elect", errors.New("want KEY [--] COMMAND [ARGS...]"))
	case len(pos) > 1:
		return usageFailure(stderr, "elect", fmt.Errorf("elect takes one KEY, not %d", len(pos)))
	case s.waitSet && s.wait == 0:
		return usageFailure(stderr, "elect", errors.New("--wait 0: a campaign waits; give how long, or no --wait to campaign until a signal"))
	}
	if s.leader == "" {
		s.leader = defaultLeader()
	}
	want := wanted{keys: pos, leader: s.leader}
	sigs := make(chan os.Signal, len(forwarded))
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	locker, err := newLocker(s.cfg) // a campaign makes rounds until ctx ends
	if err != nil {
		return failure(stderr, "elect", want, &s, err)
	}
	defer closeSoon(locker)
	for {
		t := hold(locker, want, &s, command, sigs, stderr)
		if !s.again || !t.ran || t.signalled || interrupted(t.code) {
			return t.code
		}
		select {
		case sig := <-sigs:
			return 128 + int(sig.(syscall.Signal))
		case <-time.After(againPause):
		}
	}
}

// interrupted reports whether COMMAND's exit status says a terminal's
// Ctrl-C or Ctrl-\ ended it: the terminal sends them to COMMAND's group
// alone, and they end elect --again too, as they end a shell's loop.
func interrupted(code int) bool {
	return code == 128+int(syscall.SIGINT) || code == 128+int(syscall.SIGQUIT)
}

// defaultLeader is the value a leader shows by default: HOST:PID.
func defaultLeader() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
