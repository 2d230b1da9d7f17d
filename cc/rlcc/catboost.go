package rlcc

import (
	"encoding/json"
	"errors"
	"fmt"
)

// CatBoost's JSON export (model.save_model(path, format="json")), the parts an oblivious
// float-feature regression model uses.
type cbModel struct {
	FeaturesInfo struct {
		FloatFeatures []struct {
			FeatureIndex     int       `json:"feature_index"`
			FlatFeatureIndex int       `json:"flat_feature_index"`
			FeatureID        string    `json:"feature_id"`
			Borders          []float64 `json:"borders"`
		} `json:"float_features"`
		CategoricalFeatures []json.RawMessage `json:"categorical_features"`
	} `json:"features_info"`
	ObliviousTrees []struct {
		LeafValues []float64 `json:"leaf_values"`
		Splits     []struct {
			Border            float64 `json:"border"`
			FloatFeatureIndex int     `json:"float_feature_index"`
			SplitType         string  `json:"split_type"`
		} `json:"splits"`
	} `json:"oblivious_trees"`
	Trees        json.RawMessage `json:"trees"` // non-symmetric export: refused
	ScaleAndBias json.RawMessage `json:"scale_and_bias"`
}

// ImportCatBoost converts CatBoost's JSON export of an oblivious-tree regression model
// into a Model. features names the observation feature of each CatBoost float feature,
// by float_feature_index; if nil, the export's feature_id names are used. Leaf index bit
// d is set iff feature > border of split d, as in CatBoost; leaves are multiplied by the
// export's scale and its bias is kept.
func ImportCatBoost(b []byte, features []string, lim Limits) (*Model, error) {
	var cb cbModel
	if err := json.Unmarshal(b, &cb); err != nil {
		return nil, fmt.Errorf("catboost model: %w", err)
	}
	if len(cb.ObliviousTrees) == 0 {
		if len(cb.Trees) > 0 {
			return nil, errors.New("catboost model: non-symmetric trees (grow_policy Depthwise/Lossguide): only oblivious trees (SymmetricTree) are supported")
		}
		return nil, errors.New("catboost model: no oblivious_trees")
	}
	if len(cb.FeaturesInfo.CategoricalFeatures) > 0 {
		return nil, errors.New("catboost model: categorical features are not supported (float features only)")
	}
	nf := 0
	for _, f := range cb.FeaturesInfo.FloatFeatures {
		nf = max(nf, f.FeatureIndex+1)
	}
	names := make([]string, nf)
	for _, f := range cb.FeaturesInfo.FloatFeatures {
		names[f.FeatureIndex] = f.FeatureID
	}
	if features != nil {
		if len(features) < nf {
			return nil, fmt.Errorf("catboost model: %d feature names given, the model has %d float features", len(features), nf)
		}
		names = features[:nf]
	}
	scale, bias, err := cbScaleBias(cb.ScaleAndBias)
	if err != nil {
		return nil, err
	}
	m := &Model{Format: FormatV1, Features: names, Bias: bias,
		Meta: map[string]any{"imported_from": "catboost json"}}
	for t, ct := range cb.ObliviousTrees {
		tr := Tree{Leaves: make([]float64, len(ct.LeafValues))}
		for d, s := range ct.Splits {
			if s.SplitType != "" && s.SplitType != "FloatFeature" {
				return nil, fmt.Errorf("catboost model: oblivious_trees[%d].splits[%d]: split_type %q: only FloatFeature is supported", t, d, s.SplitType)
			}
			if s.FloatFeatureIndex < 0 || s.FloatFeatureIndex >= nf {
				return nil, fmt.Errorf("catboost model: oblivious_trees[%d].splits[%d]: float_feature_index %d out of range 0..%d", t, d, s.FloatFeatureIndex, nf-1)
			}
			tr.Splits = append(tr.Splits, Split{Feature: s.FloatFeatureIndex, Border: s.Border})
		}
		if len(ct.LeafValues) != 1<<len(ct.Splits) {
			return nil, fmt.Errorf("catboost model: oblivious_trees[%d]: %d leaf values for depth %d (multi-dimensional models are not supported)", t, len(ct.LeafValues), len(ct.Splits))
		}
		for i, v := range ct.LeafValues {
			tr.Leaves[i] = v * scale
		}
		m.Trees = append(m.Trees, tr)
	}
	if err := m.Validate(lim); err != nil {
		return nil, err
	}
	return m, nil
}

// cbScaleBias reads "scale_and_bias": [scale, [bias...]] (CatBoost >= 0.24) or
// [scale, bias]; absent means [1, 0].
func cbScaleBias(raw json.RawMessage) (scale, bias float64, err error) {
	if len(raw) == 0 {
		return 1, 0, nil
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return 0, 0, fmt.Errorf("catboost model: scale_and_bias %s: want [scale, [bias]]", raw)
	}
	if err := json.Unmarshal(pair[0], &scale); err != nil {
		return 0, 0, fmt.Errorf("catboost model: scale_and_bias scale: %w", err)
	}
	var bs []float64
	if err := json.Unmarshal(pair[1], &bs); err == nil {
		if len(bs) > 1 {
			return 0, 0, fmt.Errorf("catboost model: %d-dimensional bias: only single-output regression is supported", len(bs))
		}
		if len(bs) == 1 {
			bias = bs[0]
		}
		return scale, bias, nil
	}
	if err := json.Unmarshal(pair[1], &bias); err != nil {
		return 0, 0, fmt.Errorf("catboost model: scale_and_bias bias: %w", err)
	}
	return scale, bias, nil
}
