/* Private to strategy/: MQGrad's SARSA agent (Cui et al., sec. 3.3, Alg. 2)
 * and its small Q network. Pure computation: fed one global loss and one
 * step time per training step, it returns the quantization bits for the
 * next step. Deterministic for a seed and an input sequence. */
#ifndef FSGD_MQGRAD_AGENT_H
#define FSGD_MQGRAD_AGENT_H

#include <stdint.h>

typedef struct fsgd_mq_agent_params {
    int T;              /* training steps per MDP step, and the Q network's inputs (sec. 3.3: T = 5) */
    double alpha;       /* moving average of the losses, eq. (1) (sec. 4.1: 0.01) */
    double gamma;       /* reward scale, eq. (2) (sec. 4.1: 300) */
    double eps;         /* epsilon-greedy (sec. 4.1: 0.1) */
    double eta;         /* SARSA learning rate, Alg. 2 line 5 (sec. 4.1: 0.1) */
    double discount;    /* SARSA discount (not given by the paper; see strategy/FORMAT.md) */
    int min_bits, max_bits; /* range of bits; one Q output per value (sec. 4.1: 2..8, 7 outputs) */
    int bits0;          /* n_0 */
    int hidden;         /* hidden ReLU units (sec. 4.1: 10) */
    int lower;          /* 1: the action set is {-1, 0, +1} (beyond the paper: lowering allowed) */
    int norm;           /* 1: losses in units of the run's first loss, c in units of its fastest
                         * MDP window (beyond the paper; see strategy/FORMAT.md) */
} fsgd_mq_agent_params_t;

typedef struct fsgd_mq_agent fsgd_mq_agent_t;

/* NULL on out of memory. Weights drawn from seed (splitmix64). */
fsgd_mq_agent_t *fsgd_mq_agent_new(const fsgd_mq_agent_params_t *p, uint64_t seed);
void fsgd_mq_agent_destroy(fsgd_mq_agent_t *a);

/* One training step closed with global mean loss `loss` in `seconds`:
 * returns the bits for the next step (the same bits for T steps, chosen
 * anew when an MDP step completes). A non-finite loss is ignored. */
int fsgd_mq_agent_step(fsgd_mq_agent_t *a, double loss, double seconds);

/* What the agent currently says: bits for the next step. */
int fsgd_mq_agent_bits(const fsgd_mq_agent_t *a);
/* The last reward r_{t-1} (NAN before the second MDP step), the MDP step t
 * last taken (-1 before the first), the state's n_t, and Q(s_t, a) of the last
 * state for a in {-1, 0, 1} (NAN when the action is not available). */
double fsgd_mq_agent_reward(const fsgd_mq_agent_t *a);
long fsgd_mq_agent_t_index(const fsgd_mq_agent_t *a);
int fsgd_mq_agent_state_bits(const fsgd_mq_agent_t *a);
double fsgd_mq_agent_q(const fsgd_mq_agent_t *a, int action);

#endif
