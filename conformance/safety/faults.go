package safety

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// inject applies fault f, waits its duration, and heals it.
func inject(ctx context.Context, rig *Rig, f Fault) error {
	hold := func() error { return waitCtx(context.WithoutCancel(ctx), f.Duration) }
	// during applies on to every proxy of the target node, holds, and
	// applies off.
	during := func(on, off func(*Proxy) error) error {
		if err := rig.eachProxy(f.Target, on); err != nil {
			return errors.Join(err, rig.eachProxy(f.Target, off))
		}
		return errors.Join(hold(), rig.eachProxy(f.Target, off))
	}
	switch f.Kind {
	case KillRestart:
		s := rig.Servers[f.Target]
		if err := s.Kill(); err != nil {
			return err
		}
		if err := hold(); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return s.Restart(rctx) // empty: no persistence, not adopted
	case Pause:
		s := rig.Servers[f.Target]
		if err := s.Pause(); err != nil {
			return err
		}
		err := hold()
		return errors.Join(err, s.Resume())
	case Latency:
		return during(func(p *Proxy) error { return p.SetLatency(f.Delay, f.Jitter) },
			func(p *Proxy) error { return p.SetLatency(0, 0) })
	case Bandwidth:
		return during(func(p *Proxy) error { return p.SetBandwidth(f.Rate) },
			func(p *Proxy) error { return p.SetBandwidth(0) })
	case Partition:
		return during((*Proxy).Partition, (*Proxy).Heal)
	case Down:
		return during((*Proxy).Down, (*Proxy).Up)
	case Reset:
		return rig.eachProxy(f.Target, (*Proxy).Reset)
	case Ring:
		if err := rig.Ring(true); err != nil {
			return errors.Join(err, rig.Ring(false))
		}
		return errors.Join(hold(), rig.Ring(false))
	case ClientPause:
		return nil // the client stalls itself
	}
	return fmt.Errorf("safety: unknown fault kind %q", f.Kind)
}
