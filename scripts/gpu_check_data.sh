#!/usr/bin/env bash
# Copy what scripts/gpu_check.sh reads into gpu_data/ (git-ignored, about 9 MB), so that it
# travels to the lent GPU machine, which has no network and no ../shared: name it in `carry`.
#
#   scripts/gpu_check_data.sh [SHARED_DATA_DIR]        # default: $TRANSFORMER_DATA_DIR or ../shared/data
#   scripts/gpu_check_data.sh --wheels                 # also: pytest wheels for Python 3.12 into .whl/
#
# gpu_data/ then holds
#   news/train.{en,de}                 newstest 2008-2013 EN-DE, 16,573 pairs (training text for
#                                      the base and big timings; not the WMT14 training corpus)
#   wmt14-en-de/newstest2014.{en,de}   the paper's test set, 3003 lines (decoding)
#   multi30k/train.{en,de}, val.{en,de}  for the GPU tests (tests/conftest.py's shared data)
#
# --wheels fetches pytest and its needs (pluggy, iniconfig, packaging) as wheels for the GPU
# machine's Python 3.12 into .whl/ (git-ignored); gpu_check.sh installs them into /tmp/site
# when .whl/ holds wheels. The GPU image usually has pytest already, so this is a fallback.
set -euo pipefail

SOURCE="${TRANSFORMER_DATA_DIR:-}"
WHEELS=0
for arg in "$@"; do
    case "$arg" in
        --wheels) WHEELS=1 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) SOURCE="$arg" ;;
    esac
done
# A folder given (or the variable) is the caller's, relative to where they stand; the default
# is the repository's neighbour.
if [[ -n "$SOURCE" && "$SOURCE" != /* ]]; then SOURCE="$PWD/$SOURCE"; fi
cd "$(dirname "$0")/.."
SOURCE="${SOURCE:-../shared/data}"
DEST=gpu_data
NEWS=(news-test2008 newssyscomb2009 newstest2009 newstest2010 newstest2011 newstest2012)

for file in multi30k/train.en wmt14-en-de/newstest2013.en wmt14-en-de/newstest2014.en \
    newstest-2008-2012-en-de/newstest2012.en; do
    if [[ ! -f "$SOURCE/$file" ]]; then
        echo "gpu_check_data: $SOURCE/$file not found (pass the shared data folder)" >&2
        exit 1
    fi
done

rm -rf "$DEST"
mkdir -p "$DEST/news" "$DEST/wmt14-en-de" "$DEST/multi30k"
for lang in en de; do
    paths=()
    for name in "${NEWS[@]}"; do paths+=("$SOURCE/newstest-2008-2012-en-de/$name.$lang"); done
    cat "${paths[@]}" "$SOURCE/wmt14-en-de/newstest2013.$lang" >"$DEST/news/train.$lang"
    cp "$SOURCE/wmt14-en-de/newstest2014.$lang" "$DEST/wmt14-en-de/"
    cp "$SOURCE/multi30k/train.$lang" "$SOURCE/multi30k/val.$lang" "$DEST/multi30k/"
done
chmod -R u+w "$DEST"
for prefix in news/train wmt14-en-de/newstest2014 multi30k/train multi30k/val; do
    en=$(wc -l <"$DEST/$prefix.en")
    de=$(wc -l <"$DEST/$prefix.de")
    if [[ "$en" != "$de" ]]; then
        echo "gpu_check_data: $DEST/$prefix: $en English but $de German lines" >&2
        exit 1
    fi
    echo "gpu_check_data: $DEST/$prefix.{en,de}: $en pairs"
done
echo "gpu_check_data: $(du -sh "$DEST" | cut -f1) in $DEST/ (carry it: \"carry\": [\"$DEST\"])"

if [[ "$WHEELS" == 1 ]]; then
    PYTHON="${PYTHON:-python3}"
    rm -rf .whl
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --abi none --platform any -d .whl \
        pytest==8.3.5 pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2
    echo "gpu_check_data: $(ls .whl | wc -l) wheels in .whl/ (carry it too: \".whl\")"
fi
