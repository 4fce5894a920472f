"""The theta-space machinery: pure torch, no scikit-learn."""
