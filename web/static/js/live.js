// Following a dump that a running job is still writing (issue 25): every second the page asks the
// server whether the dump changed (GET /api/live, web/live.py). A new generation (new iterations,
// graphs or ranks) reloads them in place, without a reload of the page; new hits, newly checked
// iterations or the job going quiet redraw the hit views (and the overview's warnings). A hidden tab
// does not ask.
import { api, invalidate } from './api.js';
import { state } from './state.js';

export const LIVE_MS = 1000;

/** Ask every LIVE_MS; ``onDump(answer)`` when the dump changed, ``onWatch(answer, quietNow)`` when its
 * hits did or it went quiet (``quietNow``: the job stopped writing, what was left out can be read).
 * Returns the function that stops following. */
export function follow({ onDump, onWatch }) {
  let last = null;
  let busy = false;
  const tick = async () => {
    if (busy || document.hidden || !state.dump) return;
    busy = true;
    try {
      const dump = state.dump;
      const r = await api.live(dump, state.rank);
      if (dump !== state.dump) return;
      // the first answer: the page loaded what the server served before its first look at the files
      const grew = last && last.dump === dump ? r.generation !== last.generation : r.generation > 0;
      if (grew) { invalidate(); await onDump(r); }
      if (last && last.dump === dump) {
        // quiet again: the newest iteration may be checked now, and warnings held back are settled
        if (r.hits !== last.hits || r.checked !== last.checked || r.watchpoints !== last.watchpoints
            || r.quiet !== last.quiet) await onWatch(r, r.quiet && !last.quiet);
      }
      last = { dump, ...r };
    } catch { /* the server is busy or gone: the next tick asks again */ } finally { busy = false; }
  };
  const timer = setInterval(tick, LIVE_MS);
  tick();
  return () => clearInterval(timer);
}
