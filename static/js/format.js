// How numbers and durations are written on the pages: the same rules as
// webapp/core/formatting.py (tests/webapp/test_formatting.py runs both on one table of values).
// Rounding is half-up, as Math.round.
(function (root) {
  "use strict";

  const MISSING = "–";

  function finite(value) {
    if (value === null || value === undefined || typeof value === "boolean") return null;
    const number = Number(value);
    return Number.isFinite(number) ? number : null;
  }

  function duration(seconds) {
    const value = finite(seconds);
    if (value === null || value < 0) return MISSING;
    const total = Math.floor(value + 0.5);
    if (total < 60) return total + " s";
    const units = [
      ["min", 60, "s", 1, 3600],
      ["h", 3600, "min", 60, 86400],
      ["d", 86400, "h", 3600, Infinity],
    ];
    for (const [unit, size, small, smallSize, limit] of units) {
      if (total < limit) {
        const big = Math.floor(total / size);
        const part = Math.floor((total % size) / smallSize);
        return big + " " + unit + (part ? " " + part + " " + small : "");
      }
    }
    return MISSING;
  }

  function number(value, digits) {
    const x = finite(value);
    return x === null ? MISSING : x.toFixed(digits);
  }

  function count(value) {
    const x = finite(value);
    return x === null ? MISSING : Math.floor(x + 0.5).toLocaleString("en-US");
  }

  // C's %g with `precision` significant digits (Python's format(x, ".4g")).
  function general(value, precision) {
    precision = precision || 4;
    if (typeof value !== "number") return String(value);
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
    if (value === 0) return Object.is(value, -0) ? "-0" : "0";
    const [mantissa, exp] = value.toExponential(precision - 1).split("e");
    const exponent = parseInt(exp, 10);
    const strip = (text) => (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);
    if (exponent < -4 || exponent >= precision) {
      const abs = Math.abs(exponent);
      return strip(mantissa) + "e" + (exponent < 0 ? "-" : "+") + (abs < 10 ? "0" + abs : String(abs));
    }
    return strip(value.toFixed(Math.max(0, precision - 1 - exponent)));
  }

  function hyperparameters(values, keys) {
    const parts = [];
    for (const key of keys) {
      if (values && key in values) parts.push(key + "=" + general(values[key], 4));
    }
    return parts.join(" ");
  }

  const api = { MISSING, duration, number, count, general, hyperparameters };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.PaddockFormat = api;
})(this);
