/**
 * Tape-based reverse-mode autodiff over a Graph.
 *
 * The graph's node list is the tape. `gradients(loss, wrt)` walks it backwards from a scalar
 * loss, asks each node's rule (registered by op type in `./ops/*.ts`, beside the forward) for one
 * gradient per input, and appends the backward nodes to the same graph, so forward and backward
 * run in one ORT session. Only nodes on a path from `wrt` to `loss` are visited, and `needs[k]`
 * tells a rule which input gradients are wanted, so indices, masks and hyperparameters cost
 * nothing. A node with no rule throws MissingGradientError naming the op.
 */
import { type Graph, GraphBuildError, type GraphNode, shapeEquals, type Tensor } from './graph.js';

/**
 * One gradient rule: given the gradients of the node's outputs (null where none flows) and which
 * inputs need a gradient, returns one gradient per input (null where not needed or not
 * differentiable). Each returned gradient has its input's dtype and shape.
 */
export type GradRule = (gy: Array<Tensor | null>, node: GraphNode, needs: boolean[]) => Array<Tensor | null>;

/** The op has no gradient rule but lies on a path from a parameter to the loss. */
export class MissingGradientError extends Error {
  constructor(
    readonly op: string,
    opts?: ErrorOptions,
  ) {
    super(`no gradient rule for op '${op}'`, opts);
    this.name = 'MissingGradientError';
  }
}

const RULES = new Map<string, GradRule>();

/** Registers the rules of one op family; a duplicate op type throws (two rules would be a bug). */
export function registerGradRules(rules: Record<string, GradRule>): void {
  for (const [op, rule] of Object.entries(rules)) {
    if (RULES.has(op)) throw new GraphBuildError(op, 'gradient rule registered twice');
    RULES.set(op, rule);
  }
}

export function hasGradRule(op: string): boolean {
  return RULES.has(op);
}

const isFloat = (t: Tensor) => t.dtype === 'float32' || t.dtype === 'float64';

/**
 * Appends the backward pass of `loss` (a scalar: rank 0 or all dims 1) and returns d loss / d t
 * for each `t` in `wrt` (zeros when the loss does not depend on `t`). `seed` replaces the
 * implicit d loss / d loss = 1 (e.g. a loss-scale input).
 */
export function gradients(loss: Tensor, wrt: Tensor[], seed?: Tensor): Tensor[] {
  const g = loss.graph;
  if (loss.shape.some((d) => d !== 1))
    throw new GraphBuildError('gradients', `loss must be a scalar, got ${loss}`);
  const tape = g.nodes.slice();

  // Forward sweep: tensors that depend on some wrt tensor.
  const depends = new Set<Tensor>(wrt.filter(isFloat));
  for (const n of tape) {
    if (n.inputs.some((t) => t && depends.has(t))) for (const o of n.outputs) if (isFloat(o)) depends.add(o);
  }
  if (!depends.has(loss)) return wrt.map((t) => zerosLike(g, t));

  const pending = new Map<Tensor, Tensor[]>([
    [
      loss,
      [
        seed ??
          g.constant(
            1,
            loss.dtype,
            loss.shape.map(() => 1),
          ),
      ],
    ],
  ]);
  const total = (t: Tensor): Tensor | null => {
    const parts = pending.get(t);
    if (!parts) return null;
    if (parts.length === 1) return parts[0];
    const [sum] = g.addNode('Sum', parts, {}, [{ dtype: t.dtype, shape: t.shape }]);
    pending.set(t, [sum]);
    return sum;
  };

  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i];
    const gy = node.outputs.map(total);
    if (gy.every((x) => x === null)) continue;
    const needs = node.inputs.map((t) => t !== null && depends.has(t));
    if (!needs.some(Boolean)) continue;
    const rule = RULES.get(node.opType);
    if (!rule) throw new MissingGradientError(node.opType);
    const gx = rule(gy, node, needs);
    if (gx.length !== node.inputs.length) {
      throw new GraphBuildError(
        node.opType,
        `gradient rule returned ${gx.length} gradients for ${node.inputs.length} inputs`,
      );
    }
    gx.forEach((gi, k) => {
      const x = node.inputs[k];
      if (!gi || !x || !needs[k]) return;
      if (!shapeEquals(gi.shape, x.shape) || gi.dtype !== x.dtype) {
        throw new GraphBuildError(node.opType, `gradient ${gi} does not match input ${k} ${x}`);
      }
      const list = pending.get(x);
      if (list) list.push(gi);
      else pending.set(x, [gi]);
    });
  }
  return wrt.map((t) => total(t) ?? zerosLike(g, t));
}

function zerosLike(g: Graph, t: Tensor): Tensor {
  const dims = t.shape.every((d) => typeof d === 'number')
    ? g.ints(t.shape as number[])
    : g.addNode('Shape', [t], {}, [{ dtype: 'int64', shape: [t.rank] }])[0];
  return g.addNode('Expand', [g.scalar(0, t.dtype), dims], {}, [{ dtype: t.dtype, shape: t.shape }])[0];
}
