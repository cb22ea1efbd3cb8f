/*
 * The scheduler-side offload protocol of hugepin (protocol/offload_scheduler.h), as a Promela model
 * for spin: copy pins, the copy-completion quorum of all ranks, the retirement fence over
 * compute-release epochs, and dead-rank handling (quarantine until exit, replacement at the
 * current epoch).
 *
 * Small on purpose: R = 2 ranks, C = 2 chunks, NJ = 2 copy jobs, MAXRET retirements, epochs up
 * to MAXE + 1. Rank 1 may be doomed: then the scheduler may declare it unresponsive at any
 * moment (a heartbeat timeout, true or false), its process exits at some moment (crash or
 * kill), the scheduler learns of the exit (pidfd), and a replacement attaches. Rank 0 may
 * report copy failures. Every action spends a bounded budget, so the state graph has no cycles
 * but the final stutter.
 *
 * Two layers of state:
 *   ground truth - what the processes really do: the copies each process may still be doing
 *                  (from dispatch until it finishes them or exits), the GPU work each has
 *                  finished, whether it exists;
 *   scheduler    - what the library knows and decides, mirroring the C++ (holds, chunk states,
 *                  job settle bits, quarantine counts, release epochs, rank states).
 * The assertions compare them wherever the scheduler lets go of something.
 *
 * Safety (assertions, `spin -a; gcc pan.c; ./pan`):
 *   - no chunk is reused while a copy of any existing process may touch it, while it has holds,
 *     or before every existing process finished the GPU work of the epoch it was retired in;
 *   - no double release: a chunk is handed back once per retirement;
 *   - quorum exact: a job completes only if every rank of the current layout copied it, and
 *     only once; a job's holds go only when no process is still copying it.
 * Progress (LTL `progress`, `./pan -a -f`, weak fairness): every retired chunk eventually
 * becomes reusable, and every hold is eventually released, also when rank 1 dies (its process
 * always exits in the end). A report ring holds one report, so a report may be in flight while
 * the scheduler declares its rank dead or learns of its exit.
 *
 * Mutants (each must make spin report an error; see check_model.sh):
 *   MUTANT_NO_FENCE         retired chunks pass the fence without waiting for the epoch
 *   MUTANT_EARLY_RELEASE    an unresponsive rank settles its jobs at once (no quarantine)
 *   MUTANT_SHORT_QUORUM     a job completes when all ranks but one reported
 *   MUTANT_DEAD_LEAVES_FENCE an unresponsive rank stops holding back the all-rank epoch
 *   MUTANT_KEEP_QUARANTINE  an exit does not settle the dead rank's jobs (breaks progress only)
 *
 * Bounds (-D to spin): MAXE, MAXRET; TWO_CHUNK_JOBS adds jobs over both chunks (a bigger
 * state space); NO_COPY_FAIL leaves copy failures out.
 */

#define R 2
#define C 2
#define NJ 2
#ifndef MAXE
#define MAXE 2        /* chunks are retired in epochs 1 .. MAXE; the engine steps to MAXE + 1 */
#endif
#ifndef MAXRET
#define MAXRET 2      /* retirements in one run */
#endif
#define DEADLY 1
#define ALL_RANKS 3   /* bitmask of the R ranks */

mtype = { COPY_OK, COPY_FAIL, REL, ATTACH };

/* Chunk states (copy_pins.h), rank states (offload_types.h), job states. */
#define ACTIVE 0
#define RETIRED 1
#define FENCED 2
#define REUSABLE 3
#define LIVE 0
#define UNRESP 1
#define EXITED 2
#define NONE 0
#define OPEN 1
#define CLOSED 2

/* ---- ground truth ---- */
byte copying[R];        /* bitmask of jobs rank r's process may be copying: from dispatch on */
byte done[R];           /* rank r's process finished its GPU work through this epoch */
bool alive[R];          /* rank r's process exists */
byte use[C];            /* GPU work of epochs <= use[c] may touch chunk c */
byte copied[NJ];        /* bitmask of ranks whose process copied job j successfully */
bool doomed;            /* rank 1 dies in this run */

/* ---- scheduler ---- */
byte cur = 1;           /* current epoch */
byte rel[R];            /* last applied compute-release per rank */
byte rstate[R];
bool member[R];         /* holds back the all-rank epoch */
byte cs[C];             /* chunk state */
byte holds[C];
byte quar[C];           /* quarantined holds */
byte stamp[C];
bool owed[C];           /* retired and not yet handed back */
byte nret;
byte jstate[NJ];
byte jchunks[NJ];       /* bitmask of chunks */
byte jsettled[NJ];      /* bitmask of ranks that settled the job */
bool jfailed[NJ];
byte jawait[NJ];        /* unresponsive ranks the job waits for */
bool jcompleted[NJ];
byte njobs;

/* Scratch for the inside of one d_step, not part of the state; a and b only in make_reusable,
 * which runs inside loops over the others. */
hidden byte i, c, m, v, j, a, b;
hidden mtype kind;

chan rep[R] = [1] of { mtype, byte };     /* worker -> scheduler: the rank's report ring */
chan gone = [1] of { byte };              /* process exits, as a pidfd reports them */

inline all_rank_epoch() {
  m = cur - 1;
  for (i : 0 .. R - 1) {
    if
    :: member[i] && rel[i] < m -> m = rel[i]
    :: else -> skip
    fi
  }
}

/* Retired chunks whose stamp the all-rank epoch reached move on: reusable, or fenced while
 * a copy holds them. */
inline drain_fence() {
  all_rank_epoch();
  for (c : 0 .. C - 1) {
    if
#ifdef MUTANT_NO_FENCE
    :: cs[c] == RETIRED ->
#else
    :: cs[c] == RETIRED && stamp[c] <= m ->
#endif
       if
       :: holds[c] == 0 -> make_reusable(c)
       :: else -> cs[c] = FENCED
       fi
    :: else -> skip
    fi
  }
}

/* Every rank settled job jj: its holds go; it completed if nobody failed it. */
inline settle(jj) {
  for (i : 0 .. R - 1) {
    assert((copying[i] & (1 << jj)) == 0);   /* nobody copies a job whose holds go */
  }
  for (c : 0 .. C - 1) {
    if
    :: jchunks[jj] & (1 << c) ->
       assert(holds[c] > quar[c]);
       holds[c]--;
       if
       :: holds[c] == 0 && cs[c] == FENCED -> make_reusable(c)
       :: else -> skip
       fi
    :: else -> skip
    fi
  }
  if
  :: !jfailed[jj] ->
     assert(!jcompleted[jj]);
     assert(copied[jj] == ALL_RANKS);         /* quorum exact: every rank copied it */
     jcompleted[jj] = true
  :: else -> skip
  fi;
  jstate[jj] = CLOSED
}

inline quarantine(jj, delta) {
  for (c : 0 .. C - 1) {
    if
    :: jchunks[jj] & (1 << c) -> quar[c] = quar[c] + delta
    :: else -> skip
    fi
  }
}

inline rank_unresponsive(r) {
  rstate[r] = UNRESP;
#ifdef MUTANT_DEAD_LEAVES_FENCE
  member[r] = false;
#endif
  for (j : 0 .. NJ - 1) {
    if
    :: jstate[j] == OPEN && (jsettled[j] & (1 << r)) == 0 ->
       jfailed[j] = true;
#ifdef MUTANT_EARLY_RELEASE
       jsettled[j] = jsettled[j] | (1 << r);
       if
       :: jsettled[j] == ALL_RANKS -> settle(j)
       :: else -> skip
       fi
#else
       jawait[j]++;
       if
       :: jawait[j] == 1 -> quarantine(j, 1)
       :: else -> skip
       fi
#endif
    :: else -> skip
    fi
  }
#ifdef MUTANT_DEAD_LEAVES_FENCE
  drain_fence();
#endif
}

inline rank_exited(r) {
  if
  :: rstate[r] == LIVE -> rank_unresponsive(r)
  :: else -> skip
  fi;
  rstate[r] = EXITED;
#ifndef MUTANT_KEEP_QUARANTINE
  for (j : 0 .. NJ - 1) {
    if
    :: jstate[j] == OPEN && (jsettled[j] & (1 << r)) == 0 ->
       jsettled[j] = jsettled[j] | (1 << r);
       jawait[j]--;
       if
       :: jawait[j] == 0 -> quarantine(j, -1)
       :: else -> skip
       fi;
       if
       :: jsettled[j] == ALL_RANKS -> settle(j)
       :: else -> skip
       fi
    :: else -> skip
    fi
  }
#endif
  member[r] = false;
  drain_fence()
}

/* One report from rank r's ring. Rejections change nothing. */
inline apply(r) {
  if
  :: kind == ATTACH ->
     if
     :: rstate[r] == EXITED ->        /* a replacement joins at the current epoch */
        rstate[r] = LIVE; member[r] = true; rel[r] = cur - 1;
        alive[r] = true; done[r] = cur - 1
     :: else -> skip
     fi
  :: kind != ATTACH && rstate[r] != LIVE -> skip     /* rank not live: rejected */
  :: kind == REL && rstate[r] == LIVE ->
     if
     :: v > rel[r] && v < cur -> rel[r] = v; drain_fence()
     :: else -> skip
     fi
  :: (kind == COPY_OK || kind == COPY_FAIL) && rstate[r] == LIVE ->
     if
     :: jstate[v] == OPEN && (jsettled[v] & (1 << r)) == 0 ->
        jsettled[v] = jsettled[v] | (1 << r);
        if
        :: kind == COPY_FAIL -> jfailed[v] = true
        :: else -> skip
        fi;
#ifdef MUTANT_SHORT_QUORUM
        if
        :: !jfailed[v] -> jsettled[v] = ALL_RANKS
        :: else -> skip
        fi;
#endif
        if
        :: jsettled[v] == ALL_RANKS -> settle(v)
        :: else -> skip
        fi
     :: else -> skip                  /* unknown job or duplicate: rejected */
     fi
  fi
}

/* Chunk cc becomes reusable (the engine takes it back at once): what the scheduler promises
 * is checked against what the processes really do, at the moment it lets go. */
inline make_reusable(cc) {
  assert(holds[cc] == 0 && quar[cc] == 0);
  for (a : 0 .. R - 1) {
    for (b : 0 .. NJ - 1) {                       /* no copy of an existing process touches it */
      assert((copying[a] & (1 << b)) == 0 || (jchunks[b] & (1 << cc)) == 0)
    }
    assert(!alive[a] || done[a] >= use[cc])       /* no GPU work of its epoch is left */
  }
  assert(owed[cc]);                               /* handed back once per retirement */
  owed[cc] = false;
  cs[cc] = ACTIVE
}

inline retire(cc) {
  cs[cc] = RETIRED; stamp[cc] = cur; use[cc] = cur; owed[cc] = true; nret++
}

inline dispatch(mask) {
  for (c : 0 .. C - 1) {
    if
    :: mask & (1 << c) -> holds[c]++
    :: else -> skip
    fi
  }
  jstate[njobs] = OPEN; jchunks[njobs] = mask;
  for (i : 0 .. R - 1) {                          /* sent: each existing process may copy now */
    if
    :: alive[i] -> copying[i] = copying[i] | (1 << njobs)
    :: else -> skip
    fi
  }
  njobs++
}

#define PINNABLE(cc) (cs[cc] == ACTIVE && quar[cc] == 0)
#define CAN_DISPATCH (njobs < NJ && rstate[0] == LIVE && rstate[1] == LIVE)

proctype scheduler() {
end:
  do
  :: d_step { CAN_DISPATCH && PINNABLE(0) -> dispatch(1) }
  :: d_step { CAN_DISPATCH && PINNABLE(1) -> dispatch(2) }
#ifdef TWO_CHUNK_JOBS
  :: d_step { CAN_DISPATCH && PINNABLE(0) && PINNABLE(1) -> dispatch(3) }
#endif
  :: d_step { rep[0]?kind, v -> apply(0); kind = 0; v = 0 }
  :: d_step { rep[1]?kind, v -> apply(1); kind = 0; v = 0 }
  :: d_step { nret < MAXRET && cur <= MAXE && cs[0] == ACTIVE -> retire(0) }
  :: d_step { nret < MAXRET && cur <= MAXE && cs[1] == ACTIVE -> retire(1) }
  :: d_step { cur <= MAXE -> cur++; drain_fence(); skip }  /* skip: a d_step must not end in a loop */
  :: d_step { doomed && rstate[DEADLY] == LIVE -> rank_unresponsive(DEADLY); skip }
  :: d_step { gone?v -> rank_exited(v); v = 0 }
  od
}

/* The process of rank r: finishes the copies sent to it (well or not), runs the GPU work of
 * closed epochs, reports each; rank 1 may die and be replaced. A dead process reports nothing;
 * its copies and GPU work end with it. Copy failures are modeled on rank 0. */
proctype worker(byte r) {
end:
  do
  :: d_step { nfull(rep[r]) && (copying[r] & 1) ->
       copying[r] = copying[r] & ~1; copied[0] = copied[0] | (1 << r); rep[r]!COPY_OK, 0 }
  :: d_step { nfull(rep[r]) && (copying[r] & 2) ->
       copying[r] = copying[r] & ~2; copied[1] = copied[1] | (1 << r); rep[r]!COPY_OK, 1 }
#ifndef NO_COPY_FAIL
  :: d_step { r == 0 && nfull(rep[r]) && (copying[r] & 1) -> copying[r] = copying[r] & ~1; rep[r]!COPY_FAIL, 0 }
  :: d_step { r == 0 && nfull(rep[r]) && (copying[r] & 2) -> copying[r] = copying[r] & ~2; rep[r]!COPY_FAIL, 1 }
#endif
  :: d_step { nfull(rep[r]) && done[r] + 1 < cur -> done[r]++; rep[r]!REL, done[r] }
  :: d_step { doomed && r == DEADLY && alive[r] -> alive[r] = false; copying[r] = 0; gone!r };
     /* A replacement process attaches once the scheduler knows the old one is gone. It starts
      * with no copies: jobs sent to the old process were settled by its exit and are not
      * replayed to the new one. */
     d_step { rstate[r] == EXITED && nfull(rep[r]) -> doomed = false; rep[r]!ATTACH, 0 };
end_waiting:
     rstate[r] == LIVE
  od
}

init {
  atomic {
    for (i : 0 .. R - 1) { alive[i] = true; member[i] = true }
    i = 0;
    if
    :: doomed = true
    :: doomed = false
    fi;
    run scheduler();
    run worker(0);
    run worker(1)
  }
}

/* Progress: every retired chunk becomes reusable (and is taken back), every hold is released. */
#define SETTLES(cc) ((cs[cc] != ACTIVE || holds[cc] > 0) -> <> (cs[cc] == ACTIVE && holds[cc] == 0))
ltl progress { [] (SETTLES(0) && SETTLES(1)) }
