#!/usr/bin/python3
"""Renders a few lines of text with a built-in 5x7 bitmap font and writes them, preprocessed for the
PP-OCRv4 detector, as one .npy array [N,3,H,W] (float32). Deterministic: no fonts, no randomness
beyond a fixed seed. Used by scripts/setup.sh as calibration and demo inputs.

usage: make_ocr_samples.py OUT.npy
"""
import sys

import numpy as np

# 5x7 glyphs, one string of 7 rows per character ('#' = ink).
FONT = {
    'A': ".###.#...##...#######...##...##...#", 'B': "####.#...##...#####.#...##...#####.",
    'C': ".#####....#....#....#....#.....####", 'D': "####.#...##...##...##...##...#####.",
    'E': "######....#....####.#....#....#####", 'F': "######....#....####.#....#....#....",
    'G': ".#####....#....#..###...##...#.###.", 'H': "#...##...##...#######...##...##...#",
    'I': ".###...#....#....#....#....#...###.", 'K': "#...##..#.#.#..##...#.#..#..#.#...#",
    'L': "#....#....#....#....#....#....#####", 'M': "#...###.###.#.##...##...##...##...#",
    'N': "#...###..##.#.##..###...##...##...#", 'O': ".###.#...##...##...##...##...#.###.",
    'P': "####.#...##...#####.#....#....#....", 'Q': ".###.#...##...##...##.#.##..#..##.#",
    'R': "####.#...##...#####.#.#..#..#.#...#", 'S': ".#####....#.....###.....#....#####.",
    'T': "#####..#....#....#....#....#....#..", 'U': "#...##...##...##...##...##...#.###.",
    'V': "#...##...##...##...##...#.#.#...#..", 'W': "#...##...##...##.#.##.#.###.###...#",
    'X': "#...##...#.#.#...#...#.#.#...##...#", 'Y': "#...##...#.#.#...#....#....#....#..",
    'Z': "#####....#...#...#...#...#....#####", '0': ".###.#...##..###.#.###..##...#.###.",
    '1': "..#...##....#....#....#....#...###.", '2': ".###.#...#....#...#...#...#...#####",
    '3': "####.....#....#.###.....#....#####.", '4': "...#...##..#.#.#..#.#####...#....#.",
    '5': "######....####.....#....#....#####.", '6': ".###.#....#....####.#...##...#.###.",
    '7': "#####....#...#...#...#....#....#...", '8': ".###.#...##...#.###.#...##...#.###.",
    '9': ".###.#...##...#.####....#....#.###.", ' ': "." * 35, '.': "." * 30 + "..#..",
    ':': "......#.........#.........#........", '-': "...............###.................",
}
LINES = [["QTOOL INT8 DEMO", "CALIBRATE 2026"], ["HELLO WORLD: 3.14", "ONNX RUNTIME"],
         ["QUANTIZATION TEST", "PER CHANNEL"], ["MODEL 42 OK", "FAST AND EXACT"]]
H, W, SCALE = 128, 416, 4


assert all(len(g) == 35 for g in FONT.values()), "every glyph is 7 rows of 5"


def render(lines, rng):
    img = np.full((H, W), 245.0, dtype=np.float32)
    for row, text in enumerate(lines):
        y0 = 18 + row * 52
        x = 10
        for ch in text:
            glyph = np.array([c == '#' for c in FONT[ch]], dtype=bool).reshape(7, 5)
            block = np.kron(glyph, np.ones((SCALE, SCALE), dtype=bool))
            h, w = block.shape
            if x + w > W:
                break
            img[y0:y0 + h, x:x + w][block] = 20.0
            x += w + SCALE
    # Soften the strokes (3x3 box blur) as a scanned or photographed print would be.
    pad = np.pad(img, 1, mode="edge")
    img = sum(pad[dy:dy + H, dx:dx + W] for dy in range(3) for dx in range(3)) / 9.0
    img += rng.normal(0, 4, img.shape).astype(np.float32)
    return np.clip(img, 0, 255)


def preprocess(gray):
    # PP-OCR det: BGR (gray -> 3 equal channels), x/255, (x - mean)/std, NCHW.
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    x = np.repeat((gray / 255.0)[None, :, :], 3, axis=0)
    return ((x - mean[:, None, None]) / std[:, None, None]).astype(np.float32)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(0)
    batch = np.stack([preprocess(render(lines, rng)) for lines in LINES])
    np.save(sys.argv[1], batch)
    print(f"make_ocr_samples: wrote {sys.argv[1]} {list(batch.shape)}")


if __name__ == "__main__":
    main()
