"""V-trace off-policy targets and the IMPALA loss.

Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance
Weighted Actor-Learner Architectures" (arXiv:1802.01561), section 4.

Layout: time-major. For an unroll of T steps from B actors, index s = 0..T-1:

  v_tm1[s]           V(x_s), the learner's value of the state acted in   [T, B]
  r_t[s]             r_s, the reward received after action a_s           [T, B]
  discount_t[s]      γ_s, the discount applied to V(x_{s+1}); 0 when x_{s+1}
                     ends an episode (x_{s+1} is then the first state of the
                     next episode inside the unroll)                     [T, B]
  log_rhos[s]        log π(a_s|x_s) - log μ(a_s|x_s), target minus
                     behaviour log-probability of the action taken       [T, B]
  bootstrap_value    V(x_T), the value of the state after the unroll     [B]

Trailing dimensions after B are allowed as long as all inputs share them.
"""

from typing import NamedTuple, Optional

import tensorflow as tf

from repertory.components.losses import base
from repertory.components.losses import ppo

# How `vtrace` forms the policy-gradient advantage from its targets.
PG_ADVANTAGES = ('vtrace', 'gae')


class VTraceReturns(NamedTuple):
  """V-trace results; both are `[T, B]` and carry no gradient.

  Attributes:
    vs: the V-trace value targets v_s (equation 1 of the paper).
    pg_advantages: ρ̄_s (r_s + γ_s v_{s+1} - V(x_s)) with ρ̄_s clipped at
      `clip_pg_rho_threshold`; the policy-gradient advantage (section 4.2),
      or its λ-return form (`vtrace(pg_advantage='gae')`).
  """
  vs: tf.Tensor
  pg_advantages: tf.Tensor


def vtrace(
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    log_rhos: tf.Tensor,
    lambda_: float = 1.0,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    pg_advantage: str = 'vtrace',
) -> VTraceReturns:
  """V-trace targets and advantages (Espeholt et al. 2018, eq. 1 and 4.2).

    ρ_s = min(ρ̄, π(a_s|x_s)/μ(a_s|x_s)),   c_s = λ min(1, π/μ)
    δ_s = ρ_s (r_s + γ_s V(x_{s+1}) - V(x_s))
    v_s - V(x_s) = δ_s + γ_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)

  computed backwards with one scan. A discount of 0 inside the unroll cuts
  both the bootstrap and the trace, so episodes that end inside an unroll are
  handled exactly as separate traces.

  The policy-gradient advantage is ρ̄_s (r_s + γ_s u_{s+1} - V(x_s)) with

    'vtrace' (the paper's): u_{s+1} = v_{s+1}
    'gae':                  u_{s+1} = (1 - λ) V(x_{s+1}) + λ v_{s+1}

  On-policy (ρ = 1) the first weighs the TD error k steps ahead by
  γ^k λ^(k-1), the second by (γλ)^k: it is then GAE(λ) (Schulman et al.
  2016, arXiv:1506.02438), PPO's advantage. With λ = 1 the two are equal.

  Args:
    v_tm1: `[T, B]` values V(x_s) under the learner's network.
    bootstrap_value: `[B]` value V(x_T) of the state after the last step.
    r_t: `[T, B]` rewards r_s.
    discount_t: `[T, B]` discounts γ_s (0 at episode ends).
    log_rhos: `[T, B]` log importance ratios log π(a_s|x_s) - log μ(a_s|x_s).
    lambda_: λ in c_s = λ min(1, ρ_s); 1 is the paper's V-trace.
    clip_rho_threshold: ρ̄ for the value targets; None disables clipping.
    clip_pg_rho_threshold: clip for ρ in the advantages; None disables.
    pg_advantage: 'vtrace' or 'gae', the advantage's form (above).

  Returns:
    `VTraceReturns(vs, pg_advantages)`, both `[T, B]`, gradients stopped.

  Raises:
    ValueError: when the shapes disagree (the message names them) or a
      threshold / λ is out of range.
  """
  fn = 'vtrace'
  v_tm1 = base.to_float(v_tm1, 'v_tm1')
  bootstrap_value = base.to_float(bootstrap_value, 'bootstrap_value')
  r_t = base.to_float(r_t, 'r_t')
  discount_t = base.to_float(discount_t, 'discount_t')
  log_rhos = base.to_float(log_rhos, 'log_rhos')
  if v_tm1.shape.rank is not None and v_tm1.shape.rank < 1:
    raise ValueError(f'{fn}: v_tm1 must be at least [T], got a scalar.')
  base.check_same_shape(fn, v_tm1=v_tm1, r_t=r_t, discount_t=discount_t,
                        log_rhos=log_rhos)
  base.check_shape(fn, 'bootstrap_value', bootstrap_value, v_tm1.shape[1:],
                   'v_tm1 without its leading time dimension')
  base.check_threshold(fn, 'clip_rho_threshold', clip_rho_threshold)
  base.check_threshold(fn, 'clip_pg_rho_threshold', clip_pg_rho_threshold)
  base.check_unit_interval(fn, 'lambda_', lambda_)
  if pg_advantage not in PG_ADVANTAGES:
    raise ValueError(f'{fn}: pg_advantage={pg_advantage!r}; choose one of '
                     f'{PG_ADVANTAGES}.')

  with tf.name_scope(fn):
    rhos = tf.exp(log_rhos)
    clipped_rhos = (rhos if clip_rho_threshold is None
                    else tf.minimum(clip_rho_threshold, rhos))
    cs = lambda_ * tf.minimum(1.0, rhos)
    v_t = base.next_values(v_tm1, bootstrap_value)  # V(x_{s+1}), [T, B]
    deltas = clipped_rhos * (r_t + discount_t * v_t - v_tm1)

    def backward(acc, elems):
      delta_s, discount_s, c_s = elems
      return delta_s + discount_s * c_s * acc

    vs_minus_v = tf.scan(
        backward, (deltas, discount_t, cs),
        initializer=tf.zeros_like(bootstrap_value), reverse=True)
    vs = vs_minus_v + v_tm1
    vs_t = base.next_values(vs, bootstrap_value)  # v_{s+1}, [T, B]
    if pg_advantage == 'gae':
      vs_t = (1.0 - lambda_) * v_t + lambda_ * vs_t
    clipped_pg_rhos = (rhos if clip_pg_rho_threshold is None
                       else tf.minimum(clip_pg_rho_threshold, rhos))
    pg_advantages = clipped_pg_rhos * (r_t + discount_t * vs_t - v_tm1)
    return VTraceReturns(vs=tf.stop_gradient(vs),
                         pg_advantages=tf.stop_gradient(pg_advantages))


def impala_loss_from_log_probs(
    target_log_prob: tf.Tensor,
    behaviour_log_prob: tf.Tensor,
    entropy: tf.Tensor,
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    baseline_cost: float = 0.5,
    entropy_cost: float = 0.01,
    lambda_: float = 1.0,
    clip_rho_threshold: Optional[float] = 1.0,
    clip_pg_rho_threshold: Optional[float] = 1.0,
    normalize_advantages: bool = False,
    mask: Optional[tf.Tensor] = None,
    returns: Optional[VTraceReturns] = None,
    pg_advantage: str = 'vtrace',
) -> base.LossOutput:
  """The IMPALA loss for any action distribution (Espeholt et al. 2018, 4.2).

    loss = mean_{s,b}[ -ρ̄_s A_s log π(a_s|x_s)
                        + baseline_cost · ½ (v_s - V(x_s))²
                        - entropy_cost · H(π(·|x_s)) ]

  with (v_s, ρ̄_s A_s) from `vtrace`. Gradients reach the target log-probs
  (through the log π term only, not through ρ), `v_tm1` and `entropy`; never
  `behaviour_log_prob` or `bootstrap_value` (targets are constants).

  Args:
    target_log_prob: `[T, B]` log π(a_s|x_s) under the learner's policy.
    behaviour_log_prob: `[T, B]` log μ(a_s|x_s) recorded by the actor.
    entropy: `[T, B]` entropy of the learner's policy at x_s.
    v_tm1, bootstrap_value, r_t, discount_t: as in `vtrace`.
    baseline_cost: weight of the value loss.
    entropy_cost: weight of the entropy bonus.
    lambda_, clip_rho_threshold, clip_pg_rho_threshold, pg_advantage: as in
      `vtrace`.
    normalize_advantages: replace ρ̄_s A_s by (ρ̄_s A_s - m) / (σ + 1e-8),
      m and σ their mean and standard deviation over the batch's real
      transitions (PPO's normalisation; `normalized_advantages`).
    mask: `[T, B]` 1 for real transitions, 0 for padding (default: all
      real); used by `normalize_advantages`, which zeroes the masked.
    returns: V-trace targets computed beforehand (e.g. once per batch, kept
      over several updates as PPO keeps its advantages over its epochs),
      used instead of `vtrace` on these inputs; None (the default) computes
      them here. Either way the loss's ρ is this call's.

  Returns:
    `LossOutput(loss, extra)`; extra holds 'policy_loss', 'baseline_loss',
    'entropy' (unweighted means), 'mean_vs', 'mean_pg_advantage', 'mean_rho'
    and 'clip_fraction' (0: nothing is clipped; `appo_loss_from_log_probs`
    reports its own).
  """
  fn = 'impala_loss'
  log_rhos, returns, pg_advantages = _targets(
      fn, target_log_prob, behaviour_log_prob, entropy, v_tm1,
      bootstrap_value, r_t, discount_t, lambda_=lambda_,
      clip_rho_threshold=clip_rho_threshold,
      clip_pg_rho_threshold=clip_pg_rho_threshold,
      normalize_advantages=normalize_advantages, mask=mask, returns=returns,
      pg_advantage=pg_advantage)
  with tf.name_scope(fn):
    policy_loss = -tf.reduce_mean(
        pg_advantages * base.to_float(target_log_prob, 'target_log_prob'))
    return _with_value_and_entropy(policy_loss, tf.constant(0.0), log_rhos,
                                   returns, v_tm1, entropy, baseline_cost,
                                   entropy_cost)


def appo_loss_from_log_probs(
    target_log_prob: tf.Tensor,
    behaviour_log_prob: tf.Tensor,
    entropy: tf.Tensor,
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    ppo_clip: ppo.ClipRange,
    mask: Optional[tf.Tensor] = None,
    baseline_cost: float = 0.5,
    entropy_cost: float = 0.01,
    **vtrace_options,
) -> base.LossOutput:
  """APPO's loss (RLlib): the IMPALA loss with PPO's clipped surrogate
  (`ppo.clipped_surrogate_objective`) as the policy term, on V-trace's
  advantages:

    policy_loss = -mean_{s,b}[ min(ρ_s Â_s, clip(ρ_s, 1-ε, 1+ε) Â_s) ]

  with ρ_s = π(a_s|x_s) / μ(a_s|x_s) (unclipped; the gradient flows through
  it) and Â_s = ρ̄_s A_s, so the learner's policy cannot move further than
  ε from the behaviour policy on a sample that would gain by it. The value
  and entropy terms are `impala_loss_from_log_probs`'s.

  Args:
    ppo_clip: ε > 0 of the clipped surrogate, or a scalar tensor (an
      annealed Variable, which may reach 0).
    mask: `[T, B]` 1 for real transitions, 0 for padding: the clip
      fraction counts the real ones (and `normalize_advantages` uses it).
    **vtrace_options: `impala_loss_from_log_probs`'s `lambda_`,
      `clip_rho_threshold`, `clip_pg_rho_threshold`,
      `normalize_advantages`, `returns` and `pg_advantage`.
    the others: as in `impala_loss_from_log_probs`.

  Returns:
    `LossOutput(loss, extra)` as `impala_loss_from_log_probs`'s, with
    'clip_fraction' the share of real transitions with |ρ - 1| > ε.
  """
  fn = 'appo_loss'
  if not isinstance(ppo_clip, (tf.Tensor, tf.Variable)):
    if ppo_clip is None:
      raise ValueError(f'{fn}: ppo_clip must be a number > 0, got None.')
    base.check_threshold(fn, 'ppo_clip', ppo_clip)
  log_rhos, returns, pg_advantages = _targets(
      fn, target_log_prob, behaviour_log_prob, entropy, v_tm1,
      bootstrap_value, r_t, discount_t, mask=mask, **vtrace_options)
  with tf.name_scope(fn):
    policy_loss = -tf.reduce_mean(ppo.clipped_surrogate_objective(
        base.to_float(target_log_prob, 'target_log_prob'),
        base.to_float(behaviour_log_prob, 'behaviour_log_prob'),
        pg_advantages, ppo_clip))
    real = (tf.ones_like(log_rhos) if mask is None
            else base.to_float(mask, 'mask'))
    clipped = tf.cast(tf.abs(tf.exp(log_rhos) - 1.0) > ppo_clip, tf.float32)
    clip_fraction = (tf.reduce_sum(real * clipped)
                     / tf.maximum(tf.reduce_sum(real), 1.0))
    return _with_value_and_entropy(policy_loss, clip_fraction, log_rhos,
                                   returns, v_tm1, entropy, baseline_cost,
                                   entropy_cost)


def _targets(fn, target_log_prob, behaviour_log_prob, entropy, v_tm1,
             bootstrap_value, r_t, discount_t, lambda_=1.0,
             clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0,
             normalize_advantages=False, mask=None, returns=None,
             pg_advantage='vtrace'):
  """Checks the shapes; (log ρ, V-trace returns, the policy term's
  advantages), all without gradient."""
  target_log_prob = base.to_float(target_log_prob, 'target_log_prob')
  behaviour_log_prob = base.to_float(behaviour_log_prob, 'behaviour_log_prob')
  v_tm1 = base.to_float(v_tm1, 'v_tm1')
  base.check_same_shape(fn, target_log_prob=target_log_prob,
                        behaviour_log_prob=behaviour_log_prob,
                        entropy=base.to_float(entropy, 'entropy'),
                        v_tm1=v_tm1)
  log_rhos = tf.stop_gradient(target_log_prob) - tf.stop_gradient(
      behaviour_log_prob)
  if returns is None:
    returns = vtrace(v_tm1, bootstrap_value, r_t, discount_t, log_rhos,
                     lambda_=lambda_, clip_rho_threshold=clip_rho_threshold,
                     clip_pg_rho_threshold=clip_pg_rho_threshold,
                     pg_advantage=pg_advantage)
  else:
    base.check_same_shape(fn, v_tm1=v_tm1, returns_vs=returns.vs,
                          returns_pg_advantages=returns.pg_advantages)
  pg_advantages = returns.pg_advantages
  if normalize_advantages:
    pg_advantages = normalized_advantages(pg_advantages, mask)
  return log_rhos, returns, pg_advantages


def _with_value_and_entropy(policy_loss, clip_fraction, log_rhos, returns,
                            v_tm1, entropy, baseline_cost, entropy_cost):
  """The whole actor-critic loss around a policy term, and its metrics."""
  v_tm1 = base.to_float(v_tm1, 'v_tm1')
  baseline_loss = 0.5 * tf.reduce_mean(tf.square(returns.vs - v_tm1))
  mean_entropy = tf.reduce_mean(base.to_float(entropy, 'entropy'))
  loss = (policy_loss + baseline_cost * baseline_loss
          - entropy_cost * mean_entropy)
  extra = {
      'policy_loss': policy_loss,
      'baseline_loss': baseline_loss,
      'entropy': mean_entropy,
      'mean_vs': tf.reduce_mean(returns.vs),
      'mean_pg_advantage': tf.reduce_mean(returns.pg_advantages),
      'mean_rho': tf.reduce_mean(tf.exp(log_rhos)),
      'clip_fraction': clip_fraction,
  }
  return base.LossOutput(loss=loss, extra=extra)


def normalized_advantages(advantages: tf.Tensor,
                          mask: Optional[tf.Tensor] = None) -> tf.Tensor:
  """`[T, B]` advantages minus their mean, over their standard deviation
  (+ 1e-8), both taken over the entries where `mask` ([T, B], default all
  ones) is 1; masked entries become 0. Gradients stopped."""
  advantages = tf.stop_gradient(base.to_float(advantages, 'advantages'))
  mask = (tf.ones_like(advantages) if mask is None
          else base.to_float(mask, 'mask'))
  count = tf.maximum(tf.reduce_sum(mask), 1.0)
  mean = tf.reduce_sum(mask * advantages) / count
  std = tf.sqrt(tf.reduce_sum(mask * tf.square(advantages - mean)) / count)
  return mask * (advantages - mean) / (std + 1e-8)


def impala_loss(
    target_logits: tf.Tensor,
    actions: tf.Tensor,
    behaviour_log_prob: tf.Tensor,
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    **kwargs,
) -> base.LossOutput:
  """The IMPALA loss for discrete actions (Espeholt et al. 2018, 4.2):
  `impala_loss_from_log_probs` with π = softmax(target_logits).

  Args:
    target_logits: `[T, B, A]` the learner's policy logits at x_s.
    actions: `[T, B]` integer actions a_s taken by the actor.
    behaviour_log_prob: `[T, B]` log μ(a_s|x_s) recorded by the actor (use
      `categorical_log_prob(behaviour_logits, actions)` if it kept logits).
    v_tm1, bootstrap_value, r_t, discount_t: as in `vtrace`.
    **kwargs: `impala_loss_from_log_probs`'s keyword arguments.
  """
  target_log_prob, entropy = _categorical(target_logits, actions,
                                          'impala_loss')
  return impala_loss_from_log_probs(
      target_log_prob, behaviour_log_prob, entropy, v_tm1, bootstrap_value,
      r_t, discount_t, **kwargs)


def appo_loss(
    target_logits: tf.Tensor,
    actions: tf.Tensor,
    behaviour_log_prob: tf.Tensor,
    v_tm1: tf.Tensor,
    bootstrap_value: tf.Tensor,
    r_t: tf.Tensor,
    discount_t: tf.Tensor,
    ppo_clip: ppo.ClipRange,
    **kwargs,
) -> base.LossOutput:
  """APPO's loss for discrete actions: `appo_loss_from_log_probs` with
  π = softmax(target_logits); arguments as `impala_loss`'s, and `ppo_clip`."""
  target_log_prob, entropy = _categorical(target_logits, actions, 'appo_loss')
  return appo_loss_from_log_probs(
      target_log_prob, behaviour_log_prob, entropy, v_tm1, bootstrap_value,
      r_t, discount_t, ppo_clip, **kwargs)


def _categorical(target_logits, actions, fn):
  """log π(a_s|x_s) and H(π(·|x_s)) of `[T, B, A]` logits."""
  target_logits = base.to_float(target_logits, 'target_logits')
  base.check_rank(target_logits, 'target_logits', [3], fn)
  return (base.categorical_log_prob(target_logits, actions),
          base.categorical_entropy(target_logits))
