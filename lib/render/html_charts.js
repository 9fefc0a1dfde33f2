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
    var rows = spec.rows.map(function (r) {
      return r.map(function (v, k) {
        if (v === 'gap') return NaN;
        if (v === null) return null;
        return k === 0 ? v / xu.div : v / yu.div;
      });
    }).sort(function (a, b) { return a[0] - b[0]; });
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
      if (s.dash) { /* a short level mark: the estimator beside a measured dot */
        series[s.name].drawPointCallback = function (g, name, ctx, cx, cy, colour) {
          ctx.strokeStyle = colour;
          ctx.lineWidth = 2;
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
    var xt = function (min, max, pixels) {
      if (cats) return cats.map(function (l, i) { return { v: i, label: l }; });
      return niceTicks(min, max, pixels, 80, xu);
    };
    var yt = function (min, max, pixels) { return niceTicks(min, max, pixels, 45, yu); };
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
          axisLabelFormatter: function (v) { return cats ? cats[Math.round(v)] || '' : withUnit(xu, sig(v)); },
          valueFormatter: function (v) { return cats ? cats[Math.round(v)] || '' : withUnit(xu, sig(v)); },
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
    var g = new Dygraph(plot, rows, opts);
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
    return { g: g, spec: spec, yu: yu };
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
    report.push(bad.length ? 'bad ' + name + ': ' + bad.join('; ') : 'ok ' + name + ': ' + line);
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
  window.addEventListener('resize', function () { /* the page's width, whatever it is */
    built.forEach(function (b) { b[1].g.resize(); });
  });
  out();
})();
