"""Line charts as PNG files with nothing but zlib and struct, for machines without matplotlib.

``line_chart(path, panels, title)`` draws one panel per ``(name, x_labels, series)`` side by side,
``series`` mapping a legend label to one value (or None) per x label; the y axis starts at 0.
Text is drawn with a 5x7 pixel font of upper-case letters, digits and a few signs.
"""
import math
import struct
import zlib

# Each glyph: 7 rows of 5 pixels, top row first, the leftmost pixel in bit 4.
_FONT = {
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14), "2": (14, 17, 1, 2, 4, 8, 31),
    "3": (31, 2, 4, 2, 1, 17, 14), "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8), "8": (14, 17, 17, 14, 17, 17, 14),
    "9": (14, 17, 17, 15, 1, 2, 12), "A": (14, 17, 17, 17, 31, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30),
    "C": (14, 17, 16, 16, 16, 17, 14), "D": (28, 18, 17, 17, 17, 18, 28), "E": (31, 16, 16, 30, 16, 16, 31),
    "F": (31, 16, 16, 30, 16, 16, 16), "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17),
    "I": (14, 4, 4, 4, 4, 4, 14), "J": (7, 2, 2, 2, 2, 18, 12), "K": (17, 18, 20, 24, 20, 18, 17),
    "L": (16, 16, 16, 16, 16, 16, 31), "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17),
    "O": (14, 17, 17, 17, 17, 17, 14), "P": (30, 17, 17, 30, 16, 16, 16), "Q": (14, 17, 17, 17, 21, 18, 13),
    "R": (30, 17, 17, 30, 20, 18, 17), "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4),
    "U": (17, 17, 17, 17, 17, 17, 14), "V": (17, 17, 17, 17, 17, 10, 4), "W": (17, 17, 17, 21, 21, 21, 10),
    "X": (17, 17, 10, 4, 10, 17, 17), "Y": (17, 17, 17, 10, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    " ": (0,) * 7, ".": (0, 0, 0, 0, 0, 12, 12), ",": (0, 0, 0, 0, 12, 4, 8), "-": (0, 0, 0, 31, 0, 0, 0),
    ":": (0, 12, 12, 0, 12, 12, 0), "/": (0, 1, 2, 4, 8, 16, 0), "(": (2, 4, 8, 8, 8, 4, 2),
    ")": (8, 4, 2, 2, 2, 4, 8), "=": (0, 0, 31, 0, 31, 0, 0), "+": (0, 4, 4, 31, 4, 4, 0),
    "_": (0, 0, 0, 0, 0, 0, 31), "%": (24, 25, 2, 4, 8, 19, 3),
}
_UNKNOWN = (31, 17, 17, 17, 17, 17, 31)  # a box for characters the font lacks

COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))
BLACK, GREY, WHITE = (0, 0, 0), (220, 220, 220), (255, 255, 255)


class Canvas:
    """An RGB image in memory."""

    def __init__(self, width, height):
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (3 * width * height))  # white

    def dot(self, x, y, colour):
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i:i + 3] = bytes(colour)

    def box(self, x0, y0, x1, y1, colour):
        """Fills [x0, x1] x [y0, y1]."""
        for y in range(y0, y1 + 1):
            for x in range(x0, x1 + 1):
                self.dot(x, y, colour)

    def line(self, x0, y0, x1, y1, colour, thickness=2):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x = x0 + (x1 - x0) * s // steps
            y = y0 + (y1 - y0) * s // steps
            self.box(x, y, x + thickness - 1, y + thickness - 1, colour)

    def text(self, x, y, text, colour=BLACK, scale=2):
        """Draws `text` with its top left corner at (x, y); returns the x after it."""
        for char in str(text).upper():
            for row, bits in enumerate(_FONT.get(char, _UNKNOWN)):
                for column in range(5):
                    if bits & (16 >> column):
                        self.box(x + column * scale, y + row * scale,
                                 x + column * scale + scale - 1, y + row * scale + scale - 1, colour)
            x += 6 * scale
        return x

    def png(self):
        """The image as PNG bytes: 8-bit RGB, no filtering, zlib-compressed."""
        stride = 3 * self.width
        raw = b"".join(b"\x00" + bytes(self.pixels[y * stride:(y + 1) * stride]) for y in range(self.height))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                + chunk(b"IEND", b""))


def text_width(text, scale=2):
    """Pixels `text` takes at `scale`."""
    return 6 * scale * len(str(text))


def nice_top(value):
    """The smallest 1, 2 or 5 times a power of ten that is at least `value` (> 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _draw_panel(canvas, left, top, width, height, name, labels, series, colours, x_title):
    margin_left, margin_bottom = 70, 50
    x0, y0 = left + margin_left, top + height - margin_bottom  # the origin, in pixels
    plot_w, plot_h = width - margin_left - 20, height - margin_bottom - 40
    canvas.text(left + (width - text_width(name)) // 2, top + 10, name)
    values = [v for vs in series.values() for v in vs if v is not None]
    y_top = nice_top(max(values, default=1.0))
    for tick in range(6):
        y = y0 - plot_h * tick // 5
        canvas.line(x0, y, x0 + plot_w, y, GREY, thickness=1)
        label = f"{y_top * tick / 5:g}"
        canvas.text(x0 - 8 - text_width(label), y - 7, label)
    canvas.line(x0, y0, x0 + plot_w, y0, BLACK, thickness=1)
    canvas.line(x0, y0 - plot_h, x0, y0, BLACK, thickness=1)

    def x_of(i):
        return x0 + 20 + (plot_w - 40) * i // max(len(labels) - 1, 1)

    every = max(1, math.ceil(len(labels) * text_width("0000") / plot_w))  # labels must not overlap
    for i, label in enumerate(labels):
        if i % every == 0:
            canvas.text(x_of(i) - text_width(label) // 2, y0 + 10, label)
    canvas.text(x0 + (plot_w - text_width(x_title, 1)) // 2, y0 + 34, x_title, scale=1)
    for label, colour in zip(series, colours):
        previous = None
        for i, value in enumerate(series[label]):
            if value is None:
                previous = None
                continue
            point = (x_of(i), y0 - int(plot_h * value / y_top))
            canvas.box(point[0] - 3, point[1] - 3, point[0] + 3, point[1] + 3, colour)
            if previous:
                canvas.line(*previous, *point, colour)
            previous = point


def line_chart(path, panels, title, x_title="head dim", panel_width=640, panel_height=440):
    """Writes the panels side by side under `title`, with one legend for all of them below."""
    names = list(dict.fromkeys(name for _, _, series in panels for name in series))
    colours = dict(zip(names, COLOURS * (len(names) // len(COLOURS) + 1)))
    legend_rows = (len(names) + 2) // 3
    # Wide enough for the panels, the title, and three legend entries to a row (a box, a gap,
    # the longest name), so that no text is cut at the edge or runs into its neighbour.
    legend_column = 44 + max((text_width(name) for name in names), default=0)
    width = max(panel_width * max(len(panels), 1), text_width(title) + 40, 20 + 3 * legend_column)
    height = 50 + panel_height + 30 * legend_rows + 10
    canvas = Canvas(width, height)
    canvas.text((width - text_width(title)) // 2, 15, title)
    left = (width - panel_width * len(panels)) // 2  # the panels centred
    for i, (name, labels, series) in enumerate(panels):
        _draw_panel(canvas, left + i * panel_width, 50, panel_width, panel_height, name, labels, series,
                    [colours[label] for label in series], x_title)
    for i, name in enumerate(names):
        x, y = 20 + (i % 3) * ((width - 20) // 3), 50 + panel_height + 30 * (i // 3)
        canvas.box(x, y + 2, x + 14, y + 14, colours[name])
        canvas.text(x + 24, y + 2, name)
    with open(path, "wb") as out:
        out.write(canvas.png())
