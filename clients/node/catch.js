// Catch (bsuite's rules) in JavaScript: a ball falls from a random column of
// the top row, one row per step; actions 0, 1, 2 move the paddle on the
// bottom row left, not at all, right. Reward +1 if the paddle is under the
// ball when it reaches the bottom row, else -1; 0 on every other step.
'use strict';

const ROWS = 10;
const COLUMNS = 5;

class Catch {
  constructor(seed) {
    this.state = (seed >>> 0) || 1;  // xorshift32
  }

  random(n) {
    let x = this.state;
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    this.state = x;
    return x % n;
  }

  reset() {
    this.ballX = this.random(COLUMNS);
    this.ballY = 0;
    this.paddleX = Math.floor(COLUMNS / 2);
    return this.board();
  }

  // Returns {observation, reward, terminal}.
  step(action) {
    if (!(action >= 0 && action <= 2)) throw new Error(`bad action ${action}`);
    this.paddleX = Math.min(Math.max(this.paddleX + action - 1, 0), COLUMNS - 1);
    this.ballY += 1;
    const terminal = this.ballY === ROWS - 1;
    const reward = terminal ? (this.paddleX === this.ballX ? 1 : -1) : 0;
    return {observation: this.board(), reward, terminal};
  }

  board() {
    const board = new Float32Array(ROWS * COLUMNS);
    board[this.ballY * COLUMNS + this.ballX] = 1;
    board[(ROWS - 1) * COLUMNS + this.paddleX] = 1;
    return board;
  }
}

module.exports = {Catch, ROWS, COLUMNS, NUM_ACTIONS: 3};
