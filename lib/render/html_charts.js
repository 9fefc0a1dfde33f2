/* The HTML pages' charts, drawn with dygraphs (embedded beside this file).
 * Each figure of class vl-chart holds a <script type="application/json">
 * spec written by lib/render/html_chart.c:
 *   kind     "lines" (time series, points or curves) | "bars" (grouped) |
 *            "stack" (stacked bars); bars take x.labels as categories
 *   x, y     {title, unit: "bytes"|"time"|"usd"|"h"|"", log, labels}
 *   series   [{name, colour, step, points, line, width}]
 *   rows     [[x, v1, v2, ...]]: null = no value at this x, "gap" = a break
 *   bands    {kinds: [{name, colour}], list: [[t0, t1, kind, step]]}
 *   peaks    [{series, value, label}]: the record's peak of that series
 *   ranges   [[x, lo, hi]]: vertical interval lines (predictions)
 *   marks    [[x, name]]: dashed vertical lines (the job's marks)
 *   zoom     {steps: [x0, x1], whole: [x0, x1]}: the first view, and the
 *            whole run one click away
 *   disagree [x]: samples where the record's interposer counted more than
 *            its NVML reading (drawn as recorded, counted apart)
 *   meta     [{h, s}] a row each (the plan): the text hovering it shows, its
 *            marker shape (an index of shapes: [[name, what it means]])
 *   series[].shaped     each point drawn in its row's shape; .ring: a ring
 *   series[].under      the NVML series this one never exceeds at a sample
 *   series[].rank       the rank a series belongs to; .highlight: it peaks
 *   height   pixels
 * Values are raw (bytes, seconds); the unit shown is picked here from the
 * largest value, ticks are round numbers in it, never in e-notation.
 * After drawing, each chart's layout is measured and written into the
 * hidden block "vl-check": a legend over the plotted area, a tick label
 * outside its chart, in e-notation or on its neighbour, a plotted maximum
 * more than a pixel from the record's peak, or a script error reads "bad";
 * tests/cli/html_chromium.sh reads it. */
(function () {
  'use strict';
  var report = [];

  function out() {
    var pre = document.getElementById('vl-check');
    if (!pre) {
      pre = document.createElement('pre');
      pre.id = 'vl-check';
      pre.hidden = true;
      document.body.appendChild(pre);
    }
    pre.textContent = report.join('\n') + '\n';
  }
  window.addEventListener('error', function (e) {
    report.push('bad page: ' + e.message);
    out();
  });

  function esc(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;');
  }

  /* ---- units and numbers ---- */
  var GIB = 1073741824, MIB = 1048576, KIB = 1024;
  function unitOf(kind, max) {
    if (kind === 'bytes') {
      if (max >= GIB) return { div: GIB, name: 'GiB' };
      if (max >= MIB) return { div: MIB, name: 'MiB' };
      if (max >= KIB) return { div: KIB, name: 'KiB' };
      return { div: 1, name: 'B' };
    }
    if (kind === 'time') {
      if (max >= 7200) return { div: 3600, name: 'h' };
      if (max >= 120) return { div: 60, name: 'min' };
      if (max >= 1) return { div: 1, name: 's' };
      return { div: 0.001, name: 'ms' };
    }
    if (kind === 'usd') return { div: 1, name: '$', prefix: true };
    if (kind === 'hours') return { div: 1, name: '', dur: true }; /* each value its own unit */
    return { div: 1, name: kind || '' };
  }
  function fixed(v, d) {
    return v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
  }
  function decimalsFor(step) {
    if (!(step > 0)) return 0;
    return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  }
  /* three significant digits, no exponent, no trailing zeros (log axes,
   * legends): 0.25, 80, 1,230 */
  function sig(v) {
    if (v === 0 || !isFinite(v)) return '0';
    return Number(v.toPrecision(3)).toLocaleString('en-US', { maximumFractionDigits: 6 });
  }
  /* hours in the unit that fits the value: 45 min, 3.2 h, 12 days */
  function duration(h) {
    if (h < 1) return sig(h * 60) + ' min';
    if (h < 48) return sig(h) + ' h';
    return sig(h / 24) + ' days';
  }
  /* a log axis of durations: round minutes, hours and days, as many as fit */
  function durationTicks(lo, hi, pixels) {
    var nice = [1, 2, 5, 10, 15, 30].map(function (m) { return m / 60; })
      .concat([1, 2, 3, 6, 12, 24, 48, 120, 240, 480, 720, 1200, 2400, 4800, 7200, 12000, 24000]);
    var t = nice.filter(function (v) { return v >= lo && v <= hi; });
    var room = Math.max(2, Math.floor(pixels / 70)), every = Math.ceil(t.length / room);
    return t.filter(function (v, i) { return i % every === 0; })
      .map(function (v) { return { v: v, label: duration(v) }; });
  }
  function withUnit(u, s) {
    if (!u.name) return s;
    return u.prefix ? u.name + s : s + ' ' + u.name;
  }
  /* round steps: 1, 2, 2.5, 5 x 10^k, about one a `every` pixels */
  function niceTicks(lo, hi, pixels, every, u) {
    if (!(hi > lo)) return [];
    var n = Math.max(2, Math.floor(pixels / every));
    var raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    var step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
    var d = decimalsFor(step) + (m > 2 && m <= 2.5 ? 1 : 0), ticks = [];
    for (var k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++)
      ticks.push({ v: k * step, label: withUnit(u, fixed(k * step || 0, Math.min(d, 6))) });
    return ticks;
  }

  /* ---- plotters ---- */
  function seriesSlot(g) {
    return Math.abs(g.toDomXCoord(1) - g.toDomXCoord(0)) * 0.8;
  }
  function barsPlotter(e) { /* grouped: all series at once, side by side */
    if (e.seriesIndex !== 0) return;
    var g = e.dygraph, ctx = e.drawingContext, sets = e.allSeriesPoints;
    var slot = seriesSlot(g), bw = slot / sets.length, y0 = g.toDomYCoord(0);
    var colours = g.getColors();
    for (var j = 0; j < sets.length; j++) {
      ctx.fillStyle = colours[j];
      sets[j].forEach(function (p) {
        if (p.yval === null || isNaN(p.canvasy)) return;
        ctx.fillRect(p.canvasx - slot / 2 + j * bw, p.canvasy, bw - 2, y0 - p.canvasy);
      });
    }
  }
  function stackPlotter(e) { /* stacked: the first series at the bottom */
    if (e.seriesIndex !== 0) return;
    var g = e.dygraph, ctx = e.drawingContext, sets = e.allSeriesPoints;
    var slot = seriesSlot(g), colours = g.getColors(), base = [];
    for (var j = 0; j < sets.length; j++) {
      ctx.fillStyle = colours[j];
      sets[j].forEach(function (p, i) {
        var below = base[i] || 0;
        if (p.yval === null || !(p.yval > 0)) return;
        var y0 = g.toDomYCoord(below), y1 = g.toDomYCoord(below + p.yval);
        ctx.fillRect(p.canvasx - slot / 2, y1, slot, y0 - y1);
        base[i] = below + p.yval;
      });
    }
  }

  /* a plan's marker: 0 circle, 1 square, 2 triangle, 3 diamond, 4 star */
  function drawShape(ctx, k, cx, cy, r, colour) {
    ctx.fillStyle = colour;
    ctx.beginPath();
    if (k === 1) ctx.rect(cx - r, cy - r, 2 * r, 2 * r);
    else if (k === 2) { ctx.moveTo(cx, cy - r * 1.3); ctx.lineTo(cx + r * 1.2, cy + r); ctx.lineTo(cx - r * 1.2, cy + r); }
    else if (k === 3) { ctx.moveTo(cx, cy - r * 1.4); ctx.lineTo(cx + r * 1.2, cy); ctx.lineTo(cx, cy + r * 1.4); ctx.lineTo(cx - r * 1.2, cy); }
    else if (k === 4) {
      for (var i = 0; i < 10; i++) {
        var a = Math.PI / 5 * i - Math.PI / 2, q = i % 2 ? r * 0.6 : r * 1.5;
        ctx[i ? 'lineTo' : 'moveTo'](cx + q * Math.cos(a), cy + q * Math.sin(a));
      }
    } else ctx.arc(cx, cy, r, 0, 2 * Math.PI);
    ctx.closePath();
    ctx.fill();
  }

  /* ---- one chart ---- */
  function build(fig) {
    var spec = JSON.parse(fig.querySelector('script.vl-spec').textContent);
    var plot = fig.querySelector('.vl-plot'), legend = fig.querySelector('.vl-legend');
    var cats = spec.x.labels || null;
    var xmax = 0, ymax = 0;
    spec.rows.forEach(function (r) {
      xmax = Math.max(xmax, Math.abs(r[0]));
      for (var k = 1; k < r.length; k++) if (typeof r[k] === 'number') ymax = Math.max(ymax, r[k]);
    });
    if (spec.kind === 'stack')
      ymax = Math.max.apply(null, spec.rows.map(function (r) {
        return r.slice(1).reduce(function (a, b) { return a + (b || 0); }, 0);
      }));
    (spec.peaks || []).forEach(function (p) { ymax = Math.max(ymax, p.value); });
    (spec.ranges || []).forEach(function (r) { ymax = Math.max(ymax, r[2]); });
    var xu = unitOf(cats ? '' : spec.x.unit, xmax), yu = unitOf(spec.y.unit, ymax);
    /* in time order, each row's meta with it */
    var order = spec.rows.map(function (r, i) { return i; });
    order.sort(function (a, b) { return spec.rows[a][0] - spec.rows[b][0]; });
    var rows = order.map(function (i) {
      return spec.rows[i].map(function (v, k) {
        if (v === 'gap') return NaN;
        if (v === null) return null;
        return k === 0 ? v / xu.div : v / yu.div;
      });
    });
    var meta = spec.meta ? order.map(function (i) { return spec.meta[i]; }) : null;
    /* dygraphs writes names into its legend as HTML */
    spec.series.forEach(function (s) { s.name = esc(s.name); });
    if (cats) cats = cats.map(esc);
    var labels = ['x'].concat(spec.series.map(function (s) { return s.name; }));
    var series = {};
    spec.series.forEach(function (s) {
      series[s.name] = {
        color: s.colour,
        stepPlot: !!s.step,
        drawPoints: !!s.points,
        pointSize: s.points ? (s.size || 3) : 1,
        strokeWidth: s.line === false ? 0 : (s.width || 1.5),
        connectSeparatedPoints: true /* "gap" (NaN) still breaks a line */
      };
      if (s.shaped && meta) { /* the row's own marker: the plan's parallelism */
        series[s.name].drawPointCallback = function (g, name, ctx, cx, cy, colour, size, idx) {
          drawShape(ctx, meta[idx] ? meta[idx].s : 0, cx, cy, 3.5, colour);
        };
        series[s.name].pointSize = 3.5;
      }
      if (s.ring) {
        series[s.name].drawPointCallback = function (g, name, ctx, cx, cy, colour) {
          ctx.strokeStyle = colour;
          ctx.lineWidth = 2.5;
          ctx.beginPath();
          ctx.arc(cx, cy, 9, 0, 2 * Math.PI);
          ctx.stroke();
        };
        series[s.name].drawHighlightPointCallback = series[s.name].drawPointCallback;
      }
      if (s.dash) { /* a short level mark: the estimator beside a measured dot */
        var thick = s.highlight ? 3 : 2;
        series[s.name].drawPointCallback = function (g, name, ctx, cx, cy, colour) {
          ctx.strokeStyle = colour;
          ctx.lineWidth = thick;
          ctx.beginPath();
          ctx.moveTo(cx - 7, cy);
          ctx.lineTo(cx + 7, cy);
          ctx.stroke();
        };
        series[s.name].drawHighlightPointCallback = series[s.name].drawPointCallback;
      }
    });
    var top = ymax / yu.div;
    var headroom = spec.bands ? 1.15 : 1.08; /* room for the step numbers */
    var showHover = null;
    var xt = function (min, max, pixels) {
      if (cats) return cats.map(function (l, i) { return { v: i, label: l }; });
      return niceTicks(min, max, pixels, 80, xu);
    };
    var yt = function (min, max, pixels) { return niceTicks(min, max, pixels, 45, yu); };
    var xfmt = function (v) {
      if (cats) return cats[Math.round(v)] || '';
      return xu.dur ? duration(v) : withUnit(xu, sig(v));
    };
    var opts = {
      labels: labels,
      series: series,
      labelsDiv: legend.querySelector('.vl-series'),
      legend: 'always',
      labelsSeparateLines: false,
      xlabel: spec.x.title + (cats || !xu.name || xu.prefix ? '' : ' (' + xu.name + ')'),
      xLabelHeight: 16,
      axisLabelFontSize: 12,
      rightGap: 20,
      digitsAfterDecimal: 3,
      axes: {
        x: {
          logscale: !!spec.x.log,
          axisLabelWidth: cats ? Math.max(60, Math.floor((plot.clientWidth - 120) / cats.length) - 4) : 80,
          axisLabelFormatter: xfmt,
          valueFormatter: xfmt,
          pixelsPerLabel: 110
        },
        y: {
          logscale: !!spec.y.log,
          axisLabelWidth: 76,
          axisLabelFormatter: function (v) { return withUnit(yu, sig(v)); },
          valueFormatter: function (v) { return withUnit(yu, sig(v)); },
          pixelsPerLabel: 40
        }
      }
    };
    if (spec.x.unit === 'time') { /* a long run: the whole of it under the chart, to zoom */
      opts.showRangeSelector = true;
      opts.rangeSelectorHeight = 30;
      opts.rangeSelectorPlotFillColor = '#f3c2c2';
      opts.rangeSelectorPlotStrokeColor = '#d62728';
      /* dygraphs' strip skips points that share a pixel, and a spike with
       * them, unless it draws steps: steps there, each series its own way */
      opts.stepPlot = true;
    }
    /* log axes keep dygraphs' own ticker (1, 2, 5 a decade), with our labels */
    if (!spec.x.log) opts.axes.x.ticker = xt;
    if (spec.x.log && xu.dur) opts.axes.x.ticker = function (min, max, pixels) {
      return durationTicks(min, max, pixels);
    };
    if (!spec.y.log) opts.axes.y.ticker = yt;
    if (cats) {
      opts.dateWindow = [-0.5, cats.length - 0.5];
      opts.plotter = spec.kind === 'stack' ? stackPlotter : barsPlotter;
      opts.xAxisHeight = 36;
      opts.includeZero = true;
      opts.valueRange = [0, top * 1.08];
      opts.interactionModel = {};
      opts.highlightCircleSize = 0;
    } else if (!spec.y.log) {
      opts.valueRange = [0, top * headroom || 1];
    }
    /* log axes: a ninth of a decade's room on each side, so no point sits on an axis */
    function logRange(k) {
      var lo = Infinity, hi = -Infinity;
      rows.forEach(function (r) {
        for (var j = k; j < (k ? r.length : 1); j++)
          if (r[j] > 0) lo = Math.min(lo, r[j]), hi = Math.max(hi, r[j]);
      });
      return lo <= hi ? [lo / 1.3, hi * 1.3] : null;
    }
    if (spec.x.log) opts.dateWindow = logRange(0);
    if (!cats && !spec.x.log && spec.x.unit !== 'time' && rows.length) { /* no dot on an edge */
      var x0 = rows[0][0], x1 = rows[rows.length - 1][0], pad = (x1 - x0) * 0.04 || 1;
      opts.dateWindow = [x0 - pad, x1 + pad];
    }
    if (spec.y.log) opts.valueRange = logRange(1);
    if (spec.zoom) opts.dateWindow = spec.zoom.steps.map(function (v) { return v / xu.div; });
    var bands = spec.bands, ranges = spec.ranges || [], peaks = spec.peaks || [];
    var marks = spec.marks || [];
    opts.underlayCallback = function (ctx, area, g) {
      if (bands) { /* a band once it is a pixel wide; a step's number where it fits */
        var lastLabel = -1e9, lastStep = -1;
        ctx.font = '10px sans-serif';
        bands.list.forEach(function (b) {
          var x0 = g.toDomXCoord(b[0] / xu.div), x1 = g.toDomXCoord(b[1] / xu.div);
          if (x1 < area.x || x0 > area.x + area.w || x1 - x0 < 1) return;
          ctx.fillStyle = bands.kinds[b[2]].colour;
          ctx.fillRect(x0, area.y, x1 - x0, area.h);
          var label = String(b[3]);
          if (b[3] !== lastStep && x0 > lastLabel + 6 && x0 >= area.x) {
            ctx.fillStyle = '#555';
            ctx.fillText(label, x0 + 2, area.y + 11);
            lastLabel = x0 + 2 + ctx.measureText(label).width;
          }
          lastStep = b[3];
        });
      }
      ctx.save();
      ctx.strokeStyle = '#999';
      ctx.setLineDash([3, 3]);
      marks.forEach(function (m) {
        var x = g.toDomXCoord(m[0] / xu.div);
        if (x < area.x || x > area.x + area.w) return;
        ctx.beginPath();
        ctx.moveTo(x, area.y);
        ctx.lineTo(x, area.y + area.h);
        ctx.stroke();
      });
      ctx.restore();
      ctx.strokeStyle = '#000';
      ranges.forEach(function (r) {
        var x = g.toDomXCoord(r[0] / xu.div);
        ctx.beginPath();
        ctx.moveTo(x, g.toDomYCoord(r[1] / yu.div));
        ctx.lineTo(x, g.toDomYCoord(r[2] / yu.div));
        ctx.stroke();
      });
    };
    opts.drawCallback = function (g) { /* the peaks ringed, over the lines */
      var ctx = g.hidden_ctx_, colours = g.getColors();
      peaks.forEach(function (p) {
        if (p.x === undefined) return;
        ctx.strokeStyle = colours[p.series];
        ctx.lineWidth = 2;
        ctx.beginPath();
        ctx.arc(g.toDomXCoord(p.x / xu.div), g.toDomYCoord(p.value / yu.div), 6, 0, 2 * Math.PI);
        ctx.stroke();
      });
    };
    /* the y axis's title above it, where a rotated label cannot be clipped */
    plot.insertAdjacentHTML('beforebegin', '<div class="vl-ytitle">' + esc(spec.y.title) +
                            (yu.name ? ' (' + yu.name + ')' : '') + '</div>');
    if (spec.zoom) { /* the training steps first, the whole run one click away */
      plot.insertAdjacentHTML('beforebegin', '<div class="vl-zoom"><button type="button" ' +
        'data-zoom="steps">training steps</button> <button type="button" data-zoom="whole">' +
        'the whole run</button></div>');
    }
    if (meta) { /* hovering a plan names it, under the chart */
      legend.insertAdjacentHTML('beforeend', '<div class="vl-hover">hover a plan to read it</div>');
      var hover = legend.querySelector('.vl-hover');
      showHover = function (row) { if (meta[row]) hover.textContent = meta[row].h; };
      opts.highlightCallback = function (e, x, pts, row) { showHover(row); };
    }
    var g = new Dygraph(plot, rows, opts);
    fig.querySelectorAll('.vl-zoom button').forEach(function (b) {
      b.addEventListener('click', function () {
        g.updateOptions({ dateWindow: spec.zoom[b.dataset.zoom].map(function (v) { return v / xu.div; }) });
      });
    });
    var notes = legend.querySelector('.vl-notes');
    if (bands) {
      var used = {};
      bands.list.forEach(function (b) { used[b[2]] = true; });
      var html = '<span class="vl-key">phases' + (bands.every > 1 ? ' (one step in ' + bands.every +
        ' shown)' : '') + ', the step\'s number on top; zoom in where they are narrow</span>';
      bands.kinds.forEach(function (k, i) {
        if (used[i])
          html += '<span class="vl-key"><i style="background:' + k.colour + '"></i>' + esc(k.name) + '</span>';
      });
      notes.insertAdjacentHTML('beforeend', html);
    }
    if (spec.shapes && meta) { /* the markers' legend */
      var used = {};
      meta.forEach(function (m) { used[m.s] = true; });
      var glyph = { circle: '&#9679;', square: '&#9632;', triangle: '&#9650;', diamond: '&#9670;', star: '&#9733;' };
      notes.insertAdjacentHTML('beforeend', '<span class="vl-key">markers:</span>' +
        spec.shapes.map(function (sh, i) {
          return used[i] ? '<span class="vl-key">' + glyph[sh[0]] + ' ' + esc(sh[1]) + '</span>' : '';
        }).join(''));
    }
    if (marks.length)
      notes.insertAdjacentHTML('beforeend', '<span class="vl-key" title="' +
        esc(marks.map(function (m) { return m[1]; }).join(', ')) + '">&#8942; the job\'s marks (' +
        marks.length + ')</span>');
    peaks.forEach(function (p) {
      if (!p.label) return;
      var where = p.x !== undefined ? ' at ' + withUnit(xu, sig(p.x / xu.div)) : '';
      notes.insertAdjacentHTML('beforeend', '<span class="vl-key"><b style="color:' +
        spec.series[p.series].colour + '">&#9711;</b> ' + esc(p.label) + ' ' +
        withUnit(yu, fixed(p.value / yu.div, 2)) + where + '</span>');
    });
    return { g: g, spec: spec, yu: yu, xu: xu, meta: meta, fig: fig, showHover: showHover };
  }

  /* ---- the measurements ---- */
  function textRect(el) {
    var r = document.createRange();
    r.selectNodeContents(el);
    return r.getBoundingClientRect();
  }
  function overlaps(a, b) {
    return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }
  function measure(fig, c) {
    var g = c.g, bad = [], name = fig.dataset.name || 'chart';
    var box = fig.querySelector('.vl-plot').getBoundingClientRect(), a = g.getArea();
    var area = { left: box.left + a.x, top: box.top + a.y, right: box.left + a.x + a.w,
                 bottom: box.top + a.y + a.h };
    var legend = fig.querySelector('.vl-legend').getBoundingClientRect();
    if (legend.width > 0 && overlaps(legend, area)) bad.push('the legend is over the plotted area');
    var labels = fig.querySelectorAll('.dygraph-axis-label, .dygraph-label');
    labels.forEach(function (el) {
      if (!el.textContent) return;
      var r = textRect(el);
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 ||
          r.bottom > box.bottom + 0.5)
        bad.push('label "' + el.textContent + '" outside its chart');
      if (/\de[+-]?\d/.test(el.textContent)) bad.push('label "' + el.textContent + '" in e-notation');
      var lines = document.createRange();
      lines.selectNodeContents(el);
      if (lines.getClientRects().length > 1 && !(c.spec.x.labels && el.matches('.dygraph-axis-label-x')))
        bad.push('label "' + el.textContent + '" broken over lines');
      var d = el.getBoundingClientRect(); /* dygraphs' labels hide what overflows them */
      if (r.left < d.left - 0.5 || r.right > d.right + 0.5 || r.bottom > d.bottom + 0.5)
        bad.push('label "' + el.textContent + '" clipped');
    });
    ['x', 'y'].forEach(function (axis) { /* neighbouring tick labels apart */
      var r = [];
      fig.querySelectorAll('.dygraph-axis-label-' + axis).forEach(function (el) {
        if (el.textContent) r.push([el.textContent, textRect(el)]);
      });
      for (var i = 0; i < r.length; i++)
        for (var j = i + 1; j < r.length; j++)
          if (overlaps(r[i][1], r[j][1])) bad.push('labels "' + r[i][0] + '" and "' + r[j][0] + '" overlap');
    });
    var line = 'ticks ' + labels.length;
    (c.spec.peaks || []).forEach(function (p) {
      var col = p.series + 1, max = -Infinity;
      for (var i = 0; i < g.numRows(); i++) {
        var v = g.getValue(i, col);
        if (v !== null && !isNaN(v) && v > max) max = v;
      }
      var want = g.toDomYCoord(p.value / c.yu.div), got = g.toDomYCoord(max);
      var d = Math.abs(want - got);
      line += ', ' + c.spec.series[p.series].name + ' peak off by ' + d.toFixed(2) + ' px';
      if (!(d <= 1)) bad.push('the plotted maximum of ' + c.spec.series[p.series].name + ' is ' +
                              d.toFixed(1) + ' px from the peak');
      if (want < a.y - 0.5) bad.push('the peak of ' + c.spec.series[p.series].name + ' is above the chart');
    });
    var layers = checkLayers(c, bad), plans = checkPlans(c, bad);
    if (plans) line += ', ' + plans;
    if (layers) line += ', ' + layers;
    report.push(bad.length ? 'bad ' + name + ': ' + bad.join('; ') : 'ok ' + name + ': ' + line);
  }

  /* The layers never contradict each other: at every sample, no series is
   * above the NVML curve it stays under (the record's own disagreements,
   * spec.disagree, counted apart); the ranks drawn and the one that peaks;
   * the first view is the training steps. */
  function checkLayers(c, bad) {
    var spec = c.spec, g = c.g, words = [];
    var under = [], checked = 0, above = 0, recorded = 0;
    spec.series.forEach(function (s, k) { if (s.under !== undefined) under.push(k); });
    if (under.length) {
      var dis = {};
      (spec.disagree || []).forEach(function (x) { dis[x.toFixed(6)] = true; });
      spec.rows.forEach(function (r) {
        under.forEach(function (k) {
          var v = r[k + 1], u = r[spec.series[k].under + 1];
          if (typeof v !== 'number' || typeof u !== 'number') return;
          checked++;
          if (v <= u) return;
          if (dis[r[0].toFixed(6)] && spec.series[k].name.indexOf('driver') === 0) { recorded++; return; }
          above++;
          if (above <= 3)
            bad.push(spec.series[k].name + ' above ' + spec.series[spec.series[k].under].name +
                     ' at ' + r[0].toFixed(3) + ' s (' + v + ' > ' + u + ' bytes)');
        });
      });
      words.push('above NVML ' + above + ' of ' + checked + ' values at samples' +
                 (recorded ? ' (the record disagrees with itself at ' + recorded + ')' : ''));
    }
    var ranks = {}, hl = null;
    spec.series.forEach(function (s) {
      if (s.rank === undefined) return;
      ranks[s.rank] = true;
      if (s.highlight) hl = s.rank;
    });
    if (Object.keys(ranks).length)
      words.push('ranks ' + Object.keys(ranks).length + (hl !== null ? ', highlighted rank ' + hl : ''));
    if (spec.zoom) {
      var xr = g.xAxisRange(), want = spec.zoom.steps, div = c.xu.div;
      var off = Math.max(Math.abs(xr[0] * div - want[0]), Math.abs(xr[1] * div - want[1]));
      if (!(off < 1e-6 * Math.max(1, spec.zoom.whole[1])))
        bad.push('the first view is ' + xr + ', not the steps ' + want);
      words.push('zoom steps ' + want[0].toFixed(3) + '-' + want[1].toFixed(3) + ' s of ' +
                 spec.zoom.whole[0].toFixed(3) + '-' + spec.zoom.whole[1].toFixed(3) + ' s');
    }
    return words.join(', ');
  }

  /* The plan: a colour a GPU type, the shapes used, the Pareto front, and
   * hovering the chosen plan names it (GPU, count, strategy, micro-batch,
   * time, cost, the bill). */
  function checkPlans(c, bad) {
    if (!c.meta) return '';
    var spec = c.spec, g = c.g, colours = {}, gpus = 0, front = 0, chosen = -1, shapes = {};
    spec.series.forEach(function (s, k) {
      if (s.shaped) { gpus++; colours[s.colour] = true; }
      if (s.ring) chosen = k;
    });
    if (Object.keys(colours).length !== gpus) bad.push('two GPU types share a colour');
    c.meta.forEach(function (m) { shapes[m.s] = true; });
    var fk = -1;
    spec.series.forEach(function (s, k) { if (s.name.indexOf('Pareto') >= 0) fk = k; });
    var row = -1;
    for (var i = 0; i < g.numRows(); i++) {
      if (fk >= 0 && g.getValue(i, fk + 1) !== null) front++;
      if (chosen >= 0 && g.getValue(i, chosen + 1) !== null && row < 0) row = i;
    }
    var words = 'GPU types ' + gpus + ' in ' + Object.keys(colours).length + ' colours, shapes ' +
      Object.keys(shapes).length + ', Pareto front ' + front + ' plans';
    if (row >= 0) {
      g.setSelection(row); /* as the mouse does: highlightCallback's work */
      c.showHover(row);
      var text = c.fig.querySelector('.vl-hover').textContent;
      g.clearSelection();
      if (!/^the chosen plan: \d+ x .+, .+, micro-batch \d+ x \d+ .*: [\d.,]+ (min|h|days), \$[\d.,]+, the bill [\d.]+ GiB a GPU/.test(text))
        bad.push('hovering the chosen plan reads "' + text + '"');
      words += ', hover "' + text + '"';
    } else if (chosen >= 0) {
      bad.push('the chosen plan is not drawn');
    }
    var ticks = [];
    c.fig.querySelectorAll('.dygraph-axis-label-x').forEach(function (el) { ticks.push(el.textContent); });
    words += ', time ticks ' + ticks.join(' | ');
    return words;
  }

  /* The ladder's bar: its parts add up to the bar, in pixels and bytes. */
  function checkLadder() {
    document.querySelectorAll('.vl-ladder').forEach(function (bar) {
      var w = 0, b = 0, n = 0;
      bar.querySelectorAll('.vl-seg').forEach(function (s) {
        w += s.getBoundingClientRect().width;
        b += Number(s.dataset.bytes);
        n++;
      });
      var inner = bar.clientWidth, total = Number(bar.dataset.total);
      if (Math.abs(w - inner) > 1.5 || b !== total)
        report.push('bad ladder: parts ' + w.toFixed(1) + ' of ' + inner + ' px, ' + b + ' of ' +
                    total + ' bytes');
      else
        report.push('ladder ok: ' + n + ' parts, ' + w.toFixed(1) + ' of ' + inner + ' px');
    });
  }

  var built = [];
  document.querySelectorAll('figure.vl-chart').forEach(function (fig) {
    if (!JSON.parse(fig.querySelector('script.vl-spec').textContent).rows.length) {
      report.push('ok ' + (fig.dataset.name || 'chart') + ': nothing to draw');
      return;
    }
    try {
      built.push([fig, build(fig)]);
    } catch (err) {
      report.push('bad ' + (fig.dataset.name || 'chart') + ': ' + err);
      console.error(err);
    }
  });
  built.forEach(function (b) { measure(b[0], b[1]); });
  checkLadder();
  window.addEventListener('resize', function () { /* the page's width, whatever it is */
    built.forEach(function (b) { b[1].g.resize(); });
  });
  out();
})();
